# Scavenge under real mpirun: scr_app on 4 simulated nodes (8 ranks) is
# killed before any flush, a node is lost, `scr postrun` saves the newest
# checkpoint from the survivors (XOR rebuild, PARTNER second round) and
# every byte in the prefix is checked (harness/tests/scavenge.rs).
set -euo pipefail
cd "$(dirname "$0")/../.."
. ci/env.sh
workspace_bins
export SCR_APP_BIN="$PWD/target/debug/scr_app"
export SCR_BIN="$PWD/target/debug/scr"
workspace_test scavenge -- --ignored --test-threads 1
echo "scavenge: ok"
