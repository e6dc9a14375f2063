#!/usr/bin/env bash
# The checkpoint-to-cache benchmark under real MPI: 4 ranks (one process
# each) on 4 simulated nodes below /dev/shm, the same rank code and tables
# as `cargo bench -p benches --bench checkpoint` (benches/src/checkpoint.rs).
# Parameters: the same BENCH_* variables; BENCH_TIMEOUT_S bounds the whole
# job (default 900). Run from anywhere: benches/mpi-checkpoint.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. ci/env.sh
cargo build --quiet --release -p benches --bin checkpoint-mpi
exec timeout --kill-after=10 "${BENCH_TIMEOUT_S:-900}" \
  mpirun -np 4 --oversubscribe target/release/checkpoint-mpi
