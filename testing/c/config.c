/* SCR_Config / SCR_Configf set, query, unset before SCR_Init; queries and
 * refused sets after it; and misuse that must return an error, not crash:
 * NULL pointers, over-long names, calls out of order, calls before init.
 * SCR_FLUSH must not be set in the environment. */
#include "common.h"

static void expect_value(const char* query, const char* want)
{
  const char* v = SCR_Config(query);
  if (want == NULL) {
    CHECK(v == NULL);
    return;
  }
  if (v == NULL || strcmp(v, want) != 0) {
    fprintf(stderr, "rank %d: %s gave %s, want %s\n", g_rank, query, v ? v : "NULL", want);
  }
  CHECK(v != NULL && strcmp(v, want) == 0);
  free((void*) v); /* the caller frees query results */
}

int main(int argc, char** argv)
{
  test_init(&argc, &argv);
  int flag = -1;
  char buf[SCR_MAX_FILENAME];

  /* Before init: calls other than SCR_Config fail without crashing. */
  CHECK(SCR_Need_checkpoint(&flag) != SCR_SUCCESS);
  CHECK(SCR_Route_file("a", buf) != SCR_SUCCESS);
  CHECK(SCR_Finalize() != SCR_SUCCESS);
  const char* version = SCR_Get_version();
  CHECK(version != NULL && strncmp(version, "v3.1", 4) == 0);
  CHECK(SCR_Get_version() == version);

  /* Set, query, unset (the default comes back), set again. */
  CHECK(SCR_Config("SCR_FLUSH=3") == NULL);
  expect_value("SCR_FLUSH", "3");
  CHECK(SCR_Config("SCR_FLUSH=") == NULL);
  expect_value("SCR_FLUSH", "10");
  CHECK(SCR_Configf("SCR_FLUSH=%d", 4) == NULL);
  expect_value("SCR_FLUSH", "4");
  CHECK(SCR_Configf("SCR_CHECKPOINT_%s=%d", "INTERVAL", 3) == NULL);
  expect_value("SCR_CHECKPOINT_INTERVAL", "3");
  CHECK(SCR_Config("CKPT=0 TYPE=SINGLE") == NULL);
  expect_value("CKPT=0 TYPE", "SINGLE");
  /* Unset parameter with no default; invalid input; NULL. */
  expect_value("SCR_JOB_NAME", NULL);
  CHECK(SCR_Config("SCR_FLUSH=notanumber") == NULL);
  expect_value("SCR_FLUSH", "4");
  CHECK(SCR_Config(NULL) == NULL);
  CHECK(SCR_Configf(NULL) == NULL);

  OK(SCR_Init());
  CHECK(SCR_Init() != SCR_SUCCESS);

  /* After init: queries see the settings; sets are refused. */
  expect_value("SCR_FLUSH", "4");
  expect_value("CKPT=0 TYPE", "SINGLE");
  CHECK(SCR_Config("SCR_FLUSH=7") == NULL);
  expect_value("SCR_FLUSH", "4");

  /* SCR_CHECKPOINT_INTERVAL=3: every third call. */
  for (int call = 1; call <= 6; call++) {
    OK(SCR_Need_checkpoint(&flag));
    CHECK(flag == (call % 3 == 0));
  }

  /* Misuse: errors, never crashes. */
  CHECK(SCR_Need_checkpoint(NULL) != SCR_SUCCESS);
  CHECK(SCR_Should_exit(NULL) != SCR_SUCCESS);
  CHECK(SCR_Have_restart(NULL, buf) != SCR_SUCCESS);
  CHECK(SCR_Route_file(NULL, buf) != SCR_SUCCESS);
  CHECK(SCR_Route_file("x", NULL) != SCR_SUCCESS);
  CHECK(SCR_Current(NULL) != SCR_SUCCESS);
  CHECK(SCR_Delete(NULL) != SCR_SUCCESS);
  CHECK(SCR_Drop(NULL) != SCR_SUCCESS);
  char* longname = malloc(3 * SCR_MAX_FILENAME);
  memset(longname, 'a', 3 * SCR_MAX_FILENAME - 1);
  longname[3 * SCR_MAX_FILENAME - 1] = '\0';
  CHECK(SCR_Route_file(longname, buf) != SCR_SUCCESS);
  CHECK(SCR_Start_output(longname, SCR_FLAG_CHECKPOINT) != SCR_SUCCESS);
  longname[SCR_MAX_FILENAME - 1] = '\0'; /* 1023 chars + NUL: the limit */
  CHECK(SCR_Route_file(longname, buf) == SCR_SUCCESS);
  CHECK(strcmp(longname, buf) == 0);
  free(longname);
  CHECK(SCR_Complete_output(1) != SCR_SUCCESS);
  CHECK(SCR_Complete_restart(1) != SCR_SUCCESS);
  CHECK(SCR_Start_restart(buf) != SCR_SUCCESS); /* nothing to restart from */

  /* Outside a phase Route_file returns the name itself. */
  OK(SCR_Route_file("some/file.dat", buf));
  CHECK(strcmp(buf, "some/file.dat") == 0);

  /* A phase inside a phase is refused; the open one still completes. */
  OK(SCR_Start_output("cfg.1", SCR_FLAG_CHECKPOINT));
  CHECK(SCR_Start_output("cfg.2", SCR_FLAG_CHECKPOINT) != SCR_SUCCESS);
  CHECK(SCR_Complete_restart(1) != SCR_SUCCESS);
  /* Outside the prefix is an error within an output phase. */
  CHECK(SCR_Route_file("/nonexistent-outside-prefix/x", buf) != SCR_SUCCESS);
  /* One file per rank: a path routed by several ranks is a shared file,
   * an error outside bypass mode (as in LLNL SCR). */
  char mine[64];
  snprintf(mine, sizeof mine, "cfg.%d.dat", g_rank);
  OK(SCR_Route_file(mine, buf));
  CHECK(write_file(buf, g_rank, 1));
  OK(SCR_Complete_output(1));

  OK(SCR_Finalize());
  CHECK(SCR_Finalize() != SCR_SUCCESS);
  return test_done("config: set/query/unset/Configf, after-init refusal, misuse errors");
}
