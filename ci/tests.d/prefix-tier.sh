# The prefix tier under real mpirun: scr_app on 4 simulated nodes (8 ranks)
# flushing to the prefix directory, then fetching after every cache is
# wiped, after a node is lost under SINGLE, past a corrupted flushed file,
# and after a crash during an asynchronous flush
# (harness/tests/prefix_tier.rs). Every job is bounded by a timeout.
set -euo pipefail
cd "$(dirname "$0")/../.."
. ci/env.sh
workspace_bins
export SCR_APP_BIN="$PWD/target/debug/scr_app"
workspace_test prefix_tier -- --ignored --test-threads 2
echo "prefix-tier: ok"
