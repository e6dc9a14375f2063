/* A small SCR application: each rank owns a slab of numbers that it updates
 * step after step, and checkpoints through SCR after every step. When SCR
 * offers a restart, the rank reads its slab back, checks every byte against
 * what that step must hold (the slab is a pure function of rank and step)
 * and goes on from there.
 *
 * Usage: heat STEPS [--expect-restart STEP]
 * Runs until step STEPS. With --expect-restart, the run fails unless it
 * restarted from step STEP's checkpoint. Exits 0 when every check passed;
 * any failure prints "heat: FAIL rank R: why" and aborts the job. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scr.h"

/* Bytes per rank: not a multiple of any chunk size, so that redundancy
 * codes meet a short last chunk. */
#define SLAB_BYTES (300 * 1024 + 7)

static int rank = -1;

static void fail(const char* why)
{
  fprintf(stderr, "heat: FAIL rank %d: %s\n", rank, why);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

/* The slab of `r` after step `step`. */
static void slab(unsigned char* buf, int r, int step)
{
  uint32_t x = 2166136261u ^ (uint32_t) (r * 7919 + step * 104729);
  for (size_t i = 0; i < SLAB_BYTES; i++) {
    x = x * 1664525u + 1013904223u;
    buf[i] = (unsigned char) (x >> 24);
  }
}

static void checkpoint(const unsigned char* buf, int step)
{
  char name[SCR_MAX_FILENAME], file[SCR_MAX_FILENAME], path[SCR_MAX_FILENAME];
  snprintf(name, sizeof name, "step.%d", step);
  snprintf(file, sizeof file, "heat/rank_%d.dat", rank);
  if (SCR_Start_output(name, SCR_FLAG_CHECKPOINT) != SCR_SUCCESS) fail("SCR_Start_output");
  if (SCR_Route_file(file, path) != SCR_SUCCESS) fail("SCR_Route_file");
  FILE* f = fopen(path, "wb");
  int ok = f != NULL && fwrite(buf, 1, SLAB_BYTES, f) == SLAB_BYTES;
  if (f != NULL && fclose(f) != 0) ok = 0;
  if (SCR_Complete_output(ok) != SCR_SUCCESS) fail("SCR_Complete_output");
}

/* The step restarted from (0: none). Every byte read is compared with the
 * slab that step must hold; one wrong byte fails the run. */
static int restart(unsigned char* buf, unsigned char* want)
{
  int have = 0;
  char name[SCR_MAX_FILENAME], file[SCR_MAX_FILENAME], path[SCR_MAX_FILENAME];
  if (SCR_Have_restart(&have, name) != SCR_SUCCESS) fail("SCR_Have_restart");
  if (!have) return 0;
  if (SCR_Start_restart(name) != SCR_SUCCESS) fail("SCR_Start_restart");
  int step = 0;
  if (sscanf(name, "step.%d", &step) != 1 || step <= 0) fail("restart name is not step.N");
  snprintf(file, sizeof file, "heat/rank_%d.dat", rank);
  int valid = 0;
  if (SCR_Route_file(file, path) == SCR_SUCCESS) {
    FILE* f = fopen(path, "rb");
    if (f != NULL) {
      size_t n = fread(buf, 1, SLAB_BYTES + 1, f);
      fclose(f);
      slab(want, rank, step);
      valid = n == SLAB_BYTES && memcmp(buf, want, SLAB_BYTES) == 0;
    }
  }
  int rc = SCR_Complete_restart(valid);
  if (!valid) fail("restart data differ from what was written");
  if (rc != SCR_SUCCESS) fail("SCR_Complete_restart");
  return step;
}

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (!(argc == 2 || (argc == 4 && strcmp(argv[2], "--expect-restart") == 0))) {
    if (rank == 0) fprintf(stderr, "usage: heat STEPS [--expect-restart STEP]\n");
    MPI_Finalize();
    return 2;
  }
  int steps = atoi(argv[1]);
  int expect = argc == 4 ? atoi(argv[3]) : 0;
  unsigned char* buf = malloc(SLAB_BYTES + 1);
  unsigned char* want = malloc(SLAB_BYTES + 1);
  if (buf == NULL || want == NULL) fail("out of memory");

  if (SCR_Init() != SCR_SUCCESS) fail("SCR_Init");
  int from = restart(buf, want);
  if (expect != 0 && from != expect) fail("did not restart from the expected step");
  for (int step = from + 1; step <= steps; step++) {
    slab(buf, rank, step); /* the "computation" */
    checkpoint(buf, step);
  }
  if (SCR_Finalize() != SCR_SUCCESS) fail("SCR_Finalize");
  if (rank == 0) {
    if (from > 0) {
      printf("heat: restarted from step %d (every byte checked), ran to step %d\n", from, steps);
    } else {
      printf("heat: ran steps 1..%d, a checkpoint after each\n", steps);
    }
  }
  free(buf);
  free(want);
  MPI_Finalize();
  return 0;
}
