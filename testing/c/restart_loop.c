/* The restart loop of user-api.txt: when SCR_Complete_restart fails (here
 * rank 0 reports its read invalid on the first attempt), SCR_Have_restart
 * offers the next older checkpoint. Needs SCR_CACHE_SIZE >= 2.
 * Usage: restart_loop write|read */
#include "common.h"

int main(int argc, char** argv)
{
  test_init(&argc, &argv);
  CHECK(argc == 2);
  OK(SCR_Init());
  int flag = 0;
  char name[SCR_MAX_FILENAME];
  if (strcmp(argv[1], "write") == 0) {
    checkpoint("older", 1, NULL);
    checkpoint("newer", 2, NULL);
    OK(SCR_Finalize());
    return test_done("restart_loop write");
  }
  int attempts = 0, restarted = 0;
  const char* expect[] = {"newer", "older"};
  for (;;) {
    OK(SCR_Have_restart(&flag, name));
    if (!flag) break;
    CHECK(attempts < 2);
    CHECK(strcmp(name, expect[attempts]) == 0);
    OK(SCR_Start_restart(name));
    int valid = read_restart(attempts == 0 ? 2 : 1);
    CHECK(valid);
    /* First attempt: only rank 0 fails, so every rank must see a failure. */
    if (attempts == 0 && g_rank == 0) valid = 0;
    attempts++;
    int rc = SCR_Complete_restart(valid);
    if (attempts == 1) {
      CHECK(rc != SCR_SUCCESS);
      continue;
    }
    CHECK(rc == SCR_SUCCESS);
    restarted = 1;
    break;
  }
  CHECK(restarted && attempts == 2);
  OK(SCR_Have_restart(&flag, NULL));
  CHECK(flag == 0);
  OK(SCR_Finalize());
  return test_done("restart_loop read: failed restart of newer, then older restored");
}
