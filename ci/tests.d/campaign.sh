# The quick fault-injection campaign (harness/scenarios, scenarios marked
# quick) under real mpirun: every scenario must meet its expected outcome
# for every scheme, and the outcome table must match its insta snapshot;
# then `scr-harness validate` (the new-system checklist) on simulated nodes.
# scr_app and the `scr` command (whose `scr postrun` runs `scr copy` on
# every node, with the injection point scavenge.file) are built with
# injection points into target/fault-injection/debug, and the workspace's
# binaries stay free of them (ci/env.sh fault_injection_bins,
# ci/tests.d/fault-points-free.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
. ci/env.sh
fault_injection_bins
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
start=$(date +%s)
target/debug/scr-harness campaign --quick --app target/fault-injection/debug/scr_app \
  --scr target/fault-injection/debug/scr \
  --jobs 2 --out "$out" --work target/scr-harness
echo "quick campaign: $(( $(date +%s) - start )) s"
# A few random draws with every checkpoint protected in the background,
# then with flushes to the prefix (random-flush-8 of the default seed
# crashes inside a flush; in random-flush-0 a node dies inside the
# relaunch's fetch with no spare left; some relaunches crash as their
# restart in place begins), each judged by the oracle
# (harness/src/random.rs; about 10 s each).
for mode in --async --flush; do
  target/debug/scr-harness campaign --random 12 "$mode" \
    --app target/fault-injection/debug/scr_app --scr target/fault-injection/debug/scr \
    --jobs 2 --out "$out" --work target/scr-harness
done
# In random-async-13 a node of launch 1 that kept its cache dies as the
# relaunch's restart in place begins: the third launch finds one more
# node's cache lost.
target/debug/scr-harness campaign --random 14 --async --only random-async-13 \
  --app target/fault-injection/debug/scr_app --scr target/fault-injection/debug/scr \
  --jobs 2 --no-results --work target/scr-harness
# In the middle of the relaunch's rebuild: in random-169 a rank of the
# spare it rebuilds onto exits once its second rebuilt file is durable
# (RS), and in random-237 the spare itself dies there (PARTNER); in
# random-51 a survivor of launch 1 exits as it reads the first piece of
# the copy it holds for the lost rank (PARTNER), and in random-241 a
# survivor's node dies as it reads its first piece for the ring (XOR: a
# set with two members lost, `loss`). Once the relaunch's restart in
# place is recorded (`rebuild.recorded`): in random-111 a rank is killed
# after the relaunch rebuilt ckpt.2 (PARTNER), which the third launch finds
# in cache; in random-132 after it found nothing it could use and deleted
# it (XOR), so the third starts from scratch.
target/debug/scr-harness campaign --random 242 --only random-51 --only random-169 \
  --only random-237 --only random-241 --only random-111 --only random-132 \
  --app target/fault-injection/debug/scr_app --scr target/fault-injection/debug/scr \
  --jobs 2 --no-results --work target/scr-harness
# In random-347 of seed 2026112909 the last node of launch 1 dies there
# (RS): the spares had recorded the dataset, so the third launch reports
# it lost, not a start from scratch.
target/debug/scr-harness campaign --random 348 --seed 2026112909 --only random-347 \
  --app target/fault-injection/debug/scr_app --scr target/fault-injection/debug/scr \
  --jobs 2 --no-results --work target/scr-harness
SCR_HARNESS_QUICK_JSON="$out/campaign-quick.json" \
  workspace_test campaign_snapshot
# The run loop's RUN_START/RUN_END/NODE_FAIL beside the library's log.
SCR_APP_BIN="$PWD/target/fault-injection/debug/scr_app" \
  workspace_test runloop_log -- --ignored
# The new-system checklist on simulated nodes (about 10 s).
target/debug/scr-harness validate --app target/fault-injection/debug/scr_app \
  --work target/scr-harness/validate
echo "campaign: ok"
