/* SCR_Should_exit. "normal": no halt condition, so 0 (also on a run after a
 * run that finalised: SCR_FINALIZE_CALLED is cleared at init). "halted":
 * run after the test wrote ExitReason into <prefix>/.scr/halt.scr: 1, and
 * SCR_Need_checkpoint says 1 so the application checkpoints before it stops.
 * Usage: should_exit normal|halted */
#include "common.h"

int main(int argc, char** argv)
{
  test_init(&argc, &argv);
  CHECK(argc == 2);
  /* A policy that never fires in this test: only a halt makes it say 1. */
  CHECK(SCR_Config("SCR_CHECKPOINT_INTERVAL=100") == NULL);
  OK(SCR_Init());
  int flag = -1;
  if (strcmp(argv[1], "normal") == 0) {
    OK(SCR_Should_exit(&flag));
    CHECK(flag == 0);
    checkpoint("s1", 1, NULL);
    OK(SCR_Should_exit(&flag));
    CHECK(flag == 0);
    OK(SCR_Finalize());
    return test_done("should_exit normal: 0");
  }
  CHECK(strcmp(argv[1], "halted") == 0);
  OK(SCR_Should_exit(&flag));
  CHECK(flag == 1);
  OK(SCR_Need_checkpoint(&flag));
  CHECK(flag == 1);
  OK(SCR_Finalize());
  return test_done("should_exit halted: 1, and Need_checkpoint 1");
}
