# Issue 15's parameters under real mpirun (harness/tests/params.rs): CRC on
# copy and on delete, copy metadata, the flush watchdog, SCR_DEBUG levels,
# prefix size and purge, Need_checkpoint without a policy, refused
# parameters, containers (flush, fetch, a short container, scavenge),
# SCR_FLUSH_TYPE=PTHREAD flushes (blocking and in the background).
# scr_app is built with injection points (ci/env.sh fault_injection_bins,
# as for ci/tests.d/campaign.sh): the faults that strike mid-run are
# delays at injection points. Every job is bounded.
set -euo pipefail
cd "$(dirname "$0")/../.."
. ci/env.sh
# `scr` (with injection points too) runs `scr postrun` for the containers
# scavenge test.
fault_injection_bins
SCR_APP_BIN="$PWD/target/fault-injection/debug/scr_app" \
  SCR_BIN="$PWD/target/fault-injection/debug/scr" \
  workspace_test params -- --ignored --test-threads 2
echo "params: ok"
