# Halt conditions under real mpirun: scr_app --until-exit on 2 simulated
# nodes (4 ranks) stopped by each halt condition, by `scr halt` while it
# runs, and by SCR_HALT_EXIT (harness/tests/halt.rs). Every job is bounded.
set -euo pipefail
cd "$(dirname "$0")/../.."
. ci/env.sh
workspace_bins
export SCR_APP_BIN="$PWD/target/debug/scr_app"
export SCR_BIN="$PWD/target/debug/scr"
# Two jobs at a time: each is 4 ranks on 2 cores; the time conditions are
# judged against clock readings, so load does not make them flaky.
workspace_test halt -- --ignored --test-threads 2
echo "halt: ok"
