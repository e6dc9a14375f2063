/* Output datasets (SCR_FLAG_OUTPUT), combined CHECKPOINT|OUTPUT, default
 * names (NULL), the deprecated Start/Complete_checkpoint, and a failed
 * output (one rank invalid). Needs SCR_CACHE_SIZE >= 4.
 * Usage: output write|read */
#include "common.h"

int main(int argc, char** argv)
{
  test_init(&argc, &argv);
  CHECK(argc == 2);
  OK(SCR_Init());
  int flag = 0;
  char name[SCR_MAX_FILENAME], file[SCR_MAX_FILENAME], path[SCR_MAX_FILENAME];
  if (strcmp(argv[1], "write") == 0) {
    /* Output only: not a checkpoint. */
    OK(SCR_Start_output("viz.1", SCR_FLAG_OUTPUT));
    snprintf(file, sizeof file, "viz/rank_%d.txt", g_rank);
    OK(SCR_Route_file(file, path));
    CHECK(write_file(path, g_rank, 100));
    OK(SCR_Complete_output(1));
    CHECK(file_matches(path, g_rank, 100));
    /* Output reaches the prefix at complete, at the path it was routed as. */
    CHECK(file_matches(file, g_rank, 100));
    OK(SCR_Have_restart(&flag, NULL));
    CHECK(flag == 0);

    /* Both a checkpoint and output. */
    OK(SCR_Start_output("both.2", SCR_FLAG_CHECKPOINT | SCR_FLAG_OUTPUT));
    snprintf(file, sizeof file, "ckpt/rank_%d.dat", g_rank);
    OK(SCR_Route_file(file, path));
    CHECK(write_file(path, g_rank, 2));
    OK(SCR_Complete_output(1));

    /* Deprecated calls: an unnamed checkpoint. */
    OK(SCR_Start_checkpoint());
    OK(SCR_Route_file(file, path));
    CHECK(write_file(path, g_rank, 3));
    OK(SCR_Complete_checkpoint(1));

    /* A failed output: rank 1 reports invalid; every rank sees failure. */
    OK(SCR_Start_output(NULL, SCR_FLAG_CHECKPOINT));
    OK(SCR_Route_file(file, path));
    CHECK(write_file(path, g_rank, 4));
    CHECK(SCR_Complete_output(g_rank == 1 ? 0 : 1) != SCR_SUCCESS);
    OK(SCR_Finalize());
    return test_done("output write: output, checkpoint+output, deprecated checkpoint, failed output");
  }
  /* The newest valid checkpoint is the deprecated call's (step 3): not the
   * failed one, not the output-only one. */
  OK(SCR_Have_restart(&flag, name));
  CHECK(flag == 1);
  CHECK(strcmp(name, "both.2") != 0 && strcmp(name, "viz.1") != 0);
  OK(SCR_Start_restart(NULL));
  int valid = read_restart(3);
  CHECK(valid);
  OK(SCR_Complete_restart(valid));
  OK(SCR_Finalize());
  if (g_rank == 0) printf("default checkpoint name: %s\n", name);
  return test_done("output read: restarted from the unnamed checkpoint");
}
