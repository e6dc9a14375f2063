# The crash-point sweep (docs/fault-injection.md, "Crash-point sweep"): one
# rank is SIGKILLed at one hit of every injection point a small job passes
# (checkpoint, flush, summary/rank2file/index/filemap updates, fetch,
# scavenge, the rebuild at SCR_Init after a node loss), for a cache dataset
# (XOR) and a bypass dataset; each relaunch
# must restart from the checkpoint range the trace allows, every byte
# verified. The full sweep (every hit) runs by hand:
#   target/debug/scr-harness sweep --full --app target/fault-injection/debug/scr_app \
#     --scr target/fault-injection/debug/scr --jobs 2 --out results
set -euo pipefail
cd "$(dirname "$0")/../.."
. ci/env.sh
fault_injection_bins
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
start=$(date +%s)
target/debug/scr-harness sweep --app target/fault-injection/debug/scr_app \
  --scr target/fault-injection/debug/scr --jobs 2 --out "$out" --work target/scr-harness
echo "sweep: $(( $(date +%s) - start )) s"
# The same kills with each checkpoint protected in the background
# (SCR_ENCODE_ASYNC=1, checkpoint, fetch and rebuild phases): a kill before
# a checkpoint's settle may restart from the one before it, never from one
# that was not protected.
start=$(date +%s)
target/debug/scr-harness sweep --mode async \
  --app target/fault-injection/debug/scr_app --scr target/fault-injection/debug/scr \
  --jobs 2 --out "$out" --work target/scr-harness
echo "async sweep: $(( $(date +%s) - start )) s"
# Power loss of every node at each point of a checkpoint, cache and bypass,
# and of `scr postrun` (files keep only what was fsynced; faultrt::durable):
# a committed checkpoint must survive it.
start=$(date +%s)
target/debug/scr-harness sweep --power-loss --phase checkpoint --phase scavenge \
  --app target/fault-injection/debug/scr_app --scr target/fault-injection/debug/scr \
  --jobs 2 --out "$out" --work target/scr-harness
echo "power-loss sweep: $(( $(date +%s) - start )) s"
# One ENOSPC on a rank's I/O at one hit of every point (checkpoint, fetch
# and rebuild phases, both modes) and at 100 more of the other hits, drawn
# with the day's seed so that each day's CI covers other ones (the full
# sweep, about 410 cells and 200 s, runs by hand: results/sweep-io-error-full.md);
# scr_app goes on after a failed call: no cell may hang (a rank left in a
# collective the failing one skipped) or restore a wrong byte. A failing
# cell prints its replay (`--full --only NAME`).
start=$(date +%s)
seed=${SCR_SWEEP_SAMPLE_SEED:-$(date -u +%Y%m%d)}
echo "io-error sweep: --sample 100 --sample-seed $seed (SCR_SWEEP_SAMPLE_SEED=$seed replays this draw)"
target/debug/scr-harness sweep --io-error --sample 100 --sample-seed "$seed" \
  --app target/fault-injection/debug/scr_app --scr target/fault-injection/debug/scr \
  --jobs 2 --out "$out" --work target/scr-harness
echo "io-error sweep: $(( $(date +%s) - start )) s"
