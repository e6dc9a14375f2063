#!/usr/bin/env bash
# The fault-injection harness, visibly (run by ci/demo after the cache demo):
# 1. one scenario under the SCR run loop: 8 ranks of scr_app on 4 simulated
#    nodes write XOR checkpoints, node n1 dies (its ranks killed, its storage
#    removed), the health checks find it down, the relaunch runs on the
#    survivors plus spare n4, SCR rebuilds n1's files, and scr_app verifies
#    every byte it restarts from;
# 2. a small campaign across SINGLE, PARTNER, XOR and RS whose table and
#    matrix plot go to $DEMO_OUT/campaign-demo.{md,json,png} (default
#    target/demo/results; `ci/demo --out results` for the committed ones).
# Exits non-zero unless every outcome is the expected one.
set -euo pipefail
cd "$(dirname "$0")/.."
. ci/env.sh
profile=${PROFILE:-release}
flag=$([ "$profile" = release ] && echo --release || true)
out=${DEMO_OUT:-target/demo/results}
mkdir -p "$out"
echo "== building scr_app and scr with injection points (target/fault-injection, $profile)"
cargo build $flag -p testing --bin scr_app -p scr --bin scr --features scr/fault-injection,scr/cli \
  --target-dir target/fault-injection
echo "== building scr-harness and scr ($profile)"
cargo build $flag -p harness --bin scr-harness -p scr --bin scr
harness="target/$profile/scr-harness"
app="target/fault-injection/$profile/scr_app"
echo "== one scenario, step by step: node n1 dies after checkpoint 2 (XOR)"
"$harness" run --app "$app" --scenario kill-node-compute --scheme XOR --work target/demo/harness
echo
echo "== a small campaign across the four schemes"
"$harness" campaign --app "$app" --name demo --out "$out" --work target/demo/harness \
  --only kill-node-compute --only lose-two-neighbours --only lose-two-apart \
  --only bitflip-app-file --only fetch-after-losing-every-node
echo "tables: $out/campaign-demo.md, $out/campaign-demo.json; plot: $out/campaign-demo.png"
