#!/usr/bin/env bash
# The checkpoint-to-cache benchmark under real MPI: 4 ranks (one process
# each) on 4 simulated nodes below /dev/shm, the same rank code and tables
# as `cargo bench -p benches --bench checkpoint` (benches/src/checkpoint.rs).
# Parameters: the same BENCH_* variables; BENCH_TIMEOUT_S bounds the whole
# job (default 900); BENCH_SINGLE_COPY sets OpenMPI's vader single-copy
# mechanism (default cma; none is what ci/env.sh uses). Run from anywhere: benches/mpi-checkpoint.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. ci/env.sh
# OpenMPI's single-copy transfers (CMA): ci/env.sh turns them off for the
# tests, but this pattern (every rank sends and receives large pieces at
# once) runs faster with them here — results/checkpoint.md has both.
export OMPI_MCA_btl_vader_single_copy_mechanism="${BENCH_SINGLE_COPY:-cma}"
cargo build --quiet --release -p benches --bin checkpoint-mpi
exec timeout --kill-after=10 "${BENCH_TIMEOUT_S:-900}" \
  mpirun -np 4 --oversubscribe target/release/checkpoint-mpi
