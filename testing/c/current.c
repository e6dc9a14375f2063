/* SCR_Current, SCR_Delete, SCR_Drop. Needs SCR_CACHE_SIZE >= 4.
 * Usage: current write|read */
#include "common.h"

int main(int argc, char** argv)
{
  test_init(&argc, &argv);
  CHECK(argc == 2);
  OK(SCR_Init());
  int flag = 0;
  char name[SCR_MAX_FILENAME];
  if (strcmp(argv[1], "write") == 0) {
    char p1[SCR_MAX_FILENAME], p2[SCR_MAX_FILENAME], p3[SCR_MAX_FILENAME];
    checkpoint("c1", 1, p1);
    checkpoint("c2", 2, p2);
    checkpoint("c3", 3, p3);
    CHECK(exists(p1) && exists(p2) && exists(p3));
    /* Current: c2 becomes the restart point; newer c3 is deleted. */
    OK(SCR_Current("c2"));
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(!exists(p3));
    CHECK(exists(p2));
    CHECK(SCR_Current("no-such-dataset") != SCR_SUCCESS);
    /* Delete: c1 leaves the cache. */
    OK(SCR_Delete("c1"));
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(!exists(p1));
    CHECK(exists(p2));
    /* Drop: the index entry only (none yet); the cache keeps c2. */
    OK(SCR_Drop("c2"));
    OK(SCR_Drop("never-existed"));
    CHECK(exists(p2));
    OK(SCR_Finalize());
    return test_done("current write: Current deletes newer, Delete removes, Drop keeps cache");
  }
  OK(SCR_Have_restart(&flag, name));
  CHECK(flag == 1);
  CHECK(strcmp(name, "c2") == 0);
  OK(SCR_Start_restart(NULL));
  int valid = read_restart(2);
  CHECK(valid);
  OK(SCR_Complete_restart(valid));
  /* Delete the restarted checkpoint: nothing is left to restart from. */
  OK(SCR_Delete("c2"));
  OK(SCR_Finalize());
  return test_done("current read: restarted from c2");
}
