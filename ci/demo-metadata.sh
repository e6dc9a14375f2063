#!/usr/bin/env bash
# The metadata demonstration (formerly ci/demo.sh; needs release binaries:
# cargo build --release --workspace --bins).
# A simulated 4-rank job's SCR metadata written through the library's records
# on 2 simulated nodes and a prefix directory, read back and CRC-verified,
# then printed with `scr print` exactly as scr_print_hash_file shows them.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p target/demo
bin=target/release
work=target/demo/metadata
"$bin/metadata_demo" "$work" | tee target/demo/metadata.log
echo
for f in "$work/prefix/.scr/index.scr" \
         "$work/prefix/scr.dataset.1/.scr/summary.scr" \
         "$work/node0/dev/shm/demo/scr.4242/filemap.scrinfo" \
         "$work/node0/dev/shm/demo/scr.4242/filemap_0.scrinfo" \
         "$work/prefix/.scr/halt.scr"; do
  echo "== scr print ${f#$work/}"
  "$bin/scr" print "$f"
  echo
done
tail -n 1 target/demo/metadata.log
