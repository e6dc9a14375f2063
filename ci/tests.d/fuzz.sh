#!/usr/bin/env bash
# Bounded decoder fuzzing for CI (docs/fuzzing.md), a few seconds:
# the in-tree seeded mutation fuzzer for the kvtree decoders. ci/test has
# already built it (cargo test builds examples; workspace_bins finds it
# built, where `cargo run -p scr` would compile scr again with its own
# features). The seed is random unless
# SCR_FUZZ_SEED is set; it is printed, and a failure prints the exact
# replay command.
#
# The coverage-guided cargo-fuzz target runs too when SCR_CARGO_FUZZ=1 and
# cargo-fuzz is installed: installing it (~1 min) plus building libFuzzer
# (~1.5 min) on a 2-core machine would blow the CI time budget, so it is
# opt-in here and meant for long runs by hand.
set -euo pipefail
cd "$(dirname "$0")/../.."

seed="${SCR_FUZZ_SEED:-$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')}"
iters="${SCR_FUZZ_ITERS:-300000}"
echo "kvtree_fuzz: seed $seed, $iters iterations (replay: SCR_FUZZ_SEED=$seed $0)"
. ci/env.sh
workspace_bins
target/debug/examples/kvtree_fuzz --seed "$seed" --iters "$iters"

if [ "${SCR_CARGO_FUZZ:-0}" = 1 ]; then
  if ! command -v cargo-fuzz >/dev/null; then
    echo "SCR_CARGO_FUZZ=1 but cargo-fuzz is not installed (cargo install cargo-fuzz)" >&2
    exit 1
  fi
  mkdir -p scr/fuzz/corpus/kvtree_decode
  # Stable toolchain: RUSTC_BOOTSTRAP lets cargo-fuzz pass its -Z flags;
  # no sanitizer (ASan needs nightly), the decoders are safe Rust anyway.
  (cd scr && RUSTC_BOOTSTRAP=1 cargo fuzz run --sanitizer none kvtree_decode \
      fuzz/corpus/kvtree_decode fuzz/seeds/kvtree_decode -- \
      -runs="${SCR_CARGO_FUZZ_RUNS:-1000000}" -max_total_time=60 -seed="$((seed % 2147483647))")
fi
