#!/usr/bin/env bash
# SCR_FLUSH_TYPE=SYNC against PTHREAD under real mpirun: scr_app writes
# 4 checkpoints (SINGLE, 1 to 3 files per rank, ~100 MB mean file size)
# and flushes each one (SCR_FLUSH=1); SCR_DEBUG=1 prints every flush's
# time. Alternating runs, BENCH_REPS of each (default 5); per run the
# seconds of the 4 flushes summed. BENCH_NODES ranks, one per simulated
# node (default 2); BENCH_ROOT holds the prefix and the node trees
# (default /tmp, this machine's disk; /dev/shm for tmpfs). Each run is
# bounded by mpirun-sim's timeout.
# Run from anywhere: benches/flush-type.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. ci/env.sh
cargo build --quiet --release -p harness --bin mpirun-sim -p testing --bin scr_app
root="${BENCH_ROOT:-/tmp}"
nodes="${BENCH_NODES:-2}"
reps="${BENCH_REPS:-5}"
echo "nodes=$nodes root=$root reps=$reps"
for rep in $(seq 1 "$reps"); do
  for t in SYNC PTHREAD; do
    w="$(mktemp -d "$root/flush-type.XXXXXX")"
    mkdir -p "$w/prefix" "$w/nodes"
    target/release/mpirun-sim --timeout-s 300 --nodes "$nodes" --ranks-per-node 1 \
      --base "SCR_NODE_ROOT=$w/nodes" --env "SCR_PREFIX=$w/prefix" \
      --env SCR_FLUSH=1 --env "SCR_FLUSH_TYPE=$t" --env SCR_DEBUG=1 \
      --env SCR_COPY_TYPE=SINGLE --env SCR_CACHE_SIZE=1 --env "SCR_JOB_ID=ft$rep$t" -- \
      target/release/scr_app --seed 3 --mean-bytes 100000000 --checkpoints 4 \
      >"$w/out" 2>&1 || { cat "$w/out"; rm -rf "$w"; exit 1; }
    # `… done: <bytes> bytes, <n> files in <s> s (<r> MB/s)`
    grep ' done: ' "$w/out" | sed 's/.* done: //' |
      awk -v t="$t" -v rep="$rep" '{ s += $6; b += $1 }
        END { printf "%-8s rep %s: %.3f s, %.0f MiB/s\n", t, rep, s, b / s / 1048576 }'
    rm -rf "$w"
  done
done
