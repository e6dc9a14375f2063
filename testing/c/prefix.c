/* The prefix directory through the C API: checkpoints flushed at complete
 * (run with SCR_FLUSH=1) appear at their routed paths, SCR_Delete removes a
 * flushed copy, SCR_Drop forgets one in the index but keeps its files, and a
 * run whose caches are all gone fetches the newest checkpoint the index
 * still offers. Usage: prefix write|read */
#include "common.h"

/* A checkpoint routed as <name>/rank_<r>.dat, checked in the prefix after
 * its flush. */
static void checkpoint_in_dir(const char* name, int step)
{
  char file[SCR_MAX_FILENAME], path[SCR_MAX_FILENAME];
  OK(SCR_Start_output(name, SCR_FLAG_CHECKPOINT));
  snprintf(file, sizeof file, "%s/rank_%d.dat", name, g_rank);
  OK(SCR_Route_file(file, path));
  CHECK(write_file(path, g_rank, step));
  OK(SCR_Complete_output(1));
  CHECK(file_matches(file, g_rank, step));
}

int main(int argc, char** argv)
{
  test_init(&argc, &argv);
  CHECK(argc == 2);
  OK(SCR_Init());
  char file[SCR_MAX_FILENAME], path[SCR_MAX_FILENAME], name[SCR_MAX_FILENAME];
  int flag = 0;
  if (strcmp(argv[1], "write") == 0) {
    checkpoint_in_dir("c1", 1);
    checkpoint_in_dir("c2", 2);
    checkpoint_in_dir("c3", 3);
    OK(SCR_Delete("c1"));
    MPI_Barrier(MPI_COMM_WORLD);
    snprintf(file, sizeof file, "c1/rank_%d.dat", g_rank);
    CHECK(!exists(file));
    OK(SCR_Drop("c3"));
    snprintf(file, sizeof file, "c3/rank_%d.dat", g_rank);
    CHECK(exists(file));
    OK(SCR_Finalize());
    return test_done("prefix write: flushed at complete, Delete removes, Drop keeps files");
  }
  /* Every cache is gone: c3 was dropped from the index, c1 deleted, so the
   * fetch brings back c2. */
  OK(SCR_Have_restart(&flag, name));
  CHECK(flag == 1);
  CHECK(strcmp(name, "c2") == 0);
  OK(SCR_Start_restart(NULL));
  snprintf(file, sizeof file, "c2/rank_%d.dat", g_rank);
  OK(SCR_Route_file(file, path));
  int valid = file_matches(path, g_rank, 2);
  CHECK(valid);
  OK(SCR_Complete_restart(valid));
  OK(SCR_Finalize());
  return test_done("prefix read: fetched c2 bit-exact");
}
