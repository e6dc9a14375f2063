# Restart from prefixes written by LLNL SCR 3.1 (scr/tests/data/llnl-3.1):
# 4 ranks under real mpirun, every cache empty, the newest checkpoint
# fetched and compared byte for byte with the fixture; the halted prefix
# stops the job after one checkpoint (harness/tests/llnl_interop.rs).
# Every job is bounded by the cluster's timeout.
set -euo pipefail
cd "$(dirname "$0")/../.."
. ci/env.sh
workspace_bins
export SCR_APP_BIN="$PWD/target/debug/scr_app"
workspace_test llnl_interop -- --ignored --test-threads 2
echo "llnl-interop: ok"
