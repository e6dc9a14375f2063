/* Shared helpers of the C API tests: checks that abort the whole job with a
 * message naming rank, file and line, and a deterministic data pattern. */
#ifndef SCR_CAPI_TEST_COMMON_H
#define SCR_CAPI_TEST_COMMON_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <mpi.h>
#include "scr.h"

static int g_rank = -1;
static int g_size = 0;

#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "FAIL rank %d %s:%d: %s\n", g_rank, __FILE__,          \
              __LINE__, #cond);                                              \
      fflush(stderr);                                                        \
      MPI_Abort(MPI_COMM_WORLD, 1);                                          \
    }                                                                        \
  } while (0)

#define OK(call) CHECK((call) == SCR_SUCCESS)

/* Bytes per rank per checkpoint: large enough for several XOR chunks. */
#define DATA_BYTES (256 * 1024 + 13)

static inline void test_init(int* argc, char*** argv)
{
  MPI_Init(argc, argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
}

/* The content rank `rank` writes at step `step`. */
static inline void fill(unsigned char* buf, size_t n, int rank, int step)
{
  unsigned int x = 2166136261u ^ (unsigned int) (rank * 7919 + step * 104729);
  for (size_t i = 0; i < n; i++) {
    x = x * 1664525u + 1013904223u;
    buf[i] = (unsigned char) (x >> 24);
  }
}

static inline int write_file(const char* path, int rank, int step)
{
  unsigned char* buf = malloc(DATA_BYTES);
  if (buf == NULL) return 0;
  fill(buf, DATA_BYTES, rank, step);
  FILE* f = fopen(path, "wb");
  int ok = f != NULL && fwrite(buf, 1, DATA_BYTES, f) == DATA_BYTES;
  if (f != NULL && fclose(f) != 0) ok = 0;
  free(buf);
  return ok;
}

/* 1 when `path` holds exactly what write_file(rank, step) wrote. */
static inline int file_matches(const char* path, int rank, int step)
{
  unsigned char* want = malloc(DATA_BYTES);
  unsigned char* got = malloc(DATA_BYTES + 1);
  int ok = 0;
  if (want != NULL && got != NULL) {
    fill(want, DATA_BYTES, rank, step);
    FILE* f = fopen(path, "rb");
    if (f != NULL) {
      size_t n = fread(got, 1, DATA_BYTES + 1, f);
      ok = n == DATA_BYTES && memcmp(want, got, DATA_BYTES) == 0;
      fclose(f);
    }
  }
  free(want);
  free(got);
  return ok;
}

static inline int exists(const char* path)
{
  struct stat st;
  return stat(path, &st) == 0;
}

/* Write checkpoint `name` holding step `step` as ckpt/rank_<r>.dat; the
 * routed path is copied to `routed` when not NULL. */
static inline void checkpoint(const char* name, int step, char* routed)
{
  char file[SCR_MAX_FILENAME], path[SCR_MAX_FILENAME];
  snprintf(file, sizeof file, "ckpt/rank_%d.dat", g_rank);
  OK(SCR_Start_output(name, SCR_FLAG_CHECKPOINT));
  OK(SCR_Route_file(file, path));
  CHECK(strcmp(path, file) != 0);
  CHECK(write_file(path, g_rank, step));
  OK(SCR_Complete_output(1));
  if (routed != NULL) strcpy(routed, path);
}

/* Read this rank's file of the restart checkpoint; 1 when it is step `step`. */
static inline int read_restart(int step)
{
  char file[SCR_MAX_FILENAME], path[SCR_MAX_FILENAME];
  snprintf(file, sizeof file, "ckpt/rank_%d.dat", g_rank);
  if (SCR_Route_file(file, path) != SCR_SUCCESS) return 0;
  return file_matches(path, g_rank, step);
}

static inline int test_done(const char* what)
{
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 0) printf("ok: %s\n", what);
  MPI_Finalize();
  return 0;
}

#endif
