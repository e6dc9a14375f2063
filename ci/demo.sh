#!/usr/bin/env bash
# The demonstration proper (ci/demo installs and builds first): scr_app with
# 8 ranks on 4 simulated nodes writes XOR-protected checkpoints and crashes,
# node n1's tree is removed, and the job is relaunched on the 3 survivors
# plus a spare; every byte restored is verified against the data plan.
# Exits non-zero unless the newest checkpoint came back bit-exact; the last
# line says what happened. Then ci/demo-harness.sh: the SCR run loop with a
# node killed, and a small campaign whose table and plot go to $DEMO_OUT
# (ci/demo sets it: target/demo/results unless `ci/demo --out DIR`).
# The older metadata demo is ci/demo-metadata.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
. ci/env.sh
bin=target/release
mkdir -p target/demo
echo "== the cache demo: XOR on 4 simulated nodes, a crash, node n1 lost, a relaunch (log: target/demo/cache.log)"
"$bin/cache-demo" --app "$bin/scr_app" --work target/demo/cache \
  --scheme XOR --checkpoints 3 --lose n1 --timeout-s 120 2>&1 | tee target/demo/cache.log
status=${PIPESTATUS[0]}
[ "$status" = 0 ] || exit "$status"
echo
# The fault-injection harness: the run loop, a node lost, a campaign table and plot.
echo "== the fault-injection harness (log: target/demo/harness.log)"
bash ci/demo-harness.sh 2>&1 | tee target/demo/harness.log
exit "${PIPESTATUS[0]}"
