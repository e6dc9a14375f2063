# SCR 3.1's scr_have_restart and scr_srun --run-cmd/--restart-cmd under
# real mpirun (harness/tests/have_restart.rs): `scr have-restart` on 2
# simulated nodes after one is lost, then `scr run -- mpirun -rc ... -rs
# ...` relaunching into the restart command with the checkpoint's name.
# Every job is bounded.
set -euo pipefail
cd "$(dirname "$0")/../.."
. ci/env.sh
workspace_bins
export SCR_APP_BIN="$PWD/target/debug/scr_app"
export SCR_BIN="$PWD/target/debug/scr"
workspace_test have_restart -- --ignored --test-threads 1
echo "have-restart: ok"
