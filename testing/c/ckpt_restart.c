/* Checkpoint, then restart in a second run (bit-exact), choosing when to
 * checkpoint with SCR_Need_checkpoint and SCR_CHECKPOINT_INTERVAL=2.
 * Usage: ckpt_restart write|read. The node-loss test runs the same program
 * with one simulated node's directory removed between the two runs. */
#include "common.h"

int main(int argc, char** argv)
{
  test_init(&argc, &argv);
  CHECK(argc == 2);
  int flag = -1;
  char name[SCR_MAX_FILENAME], name2[SCR_MAX_FILENAME];

  CHECK(SCR_Config("SCR_CHECKPOINT_INTERVAL=2") == NULL);
  OK(SCR_Init());

  if (strcmp(argv[1], "write") == 0) {
    strcpy(name, "junk");
    OK(SCR_Have_restart(&flag, name));
    CHECK(flag == 0);
    CHECK(name[0] == '\0');
    int taken = 0;
    for (int step = 1; step <= 6; step++) {
      OK(SCR_Need_checkpoint(&flag));
      CHECK(flag == (step % 2 == 0));
      if (flag) {
        snprintf(name, sizeof name, "ckpt.%d", step);
        checkpoint(name, step, NULL);
        taken++;
        OK(SCR_Should_exit(&flag));
        CHECK(flag == 0);
      }
    }
    CHECK(taken == 3);
    OK(SCR_Finalize());
    return test_done("ckpt_restart write: 3 checkpoints at Need_checkpoint's calls 2, 4, 6");
  }

  CHECK(strcmp(argv[1], "read") == 0);
  OK(SCR_Have_restart(&flag, name));
  CHECK(flag == 1);
  CHECK(strcmp(name, "ckpt.6") == 0);
  OK(SCR_Have_restart(&flag, NULL));
  CHECK(flag == 1);
  OK(SCR_Start_restart(name2));
  CHECK(strcmp(name, name2) == 0);
  /* A file this rank did not write is an error within a restart. */
  CHECK(SCR_Route_file("ckpt/not_written.dat", name2) != SCR_SUCCESS);
  int valid = read_restart(6);
  CHECK(valid);
  OK(SCR_Complete_restart(valid));
  OK(SCR_Have_restart(&flag, NULL));
  CHECK(flag == 0);
  /* The application goes on checkpointing after its restart. */
  checkpoint("ckpt.8", 8, NULL);
  OK(SCR_Finalize());
  return test_done("ckpt_restart read: ckpt.6 restored bit-exact");
}
