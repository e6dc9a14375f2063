# The cache tier under real mpirun: scr_app on 4 simulated nodes (8 ranks)
# for every redundancy scheme, with lost nodes, spares and flipped bits
# (harness/tests/cache_tier.rs). Every job is bounded by a timeout.
set -euo pipefail
cd "$(dirname "$0")/../.."
. ci/env.sh
workspace_bins
export SCR_APP_BIN="$PWD/target/debug/scr_app"
# Two scenarios at a time: each is 8 ranks on 2 cores.
workspace_test cache_tier -- --ignored --test-threads 2
echo "cache-tier: ok"
