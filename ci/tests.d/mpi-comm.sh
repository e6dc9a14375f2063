# The communicator conformance suite under real MPI: 4 ranks on 2 simulated
# nodes, launched by harness's mpirun-sim (bounded wait, group kill).
set -euo pipefail
cd "$(dirname "$0")/../.."
. ci/env.sh
cargo build --quiet -p testing --bin comm_conformance -p harness --bin mpirun-sim
bin=target/debug
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
"$bin/mpirun-sim" --nodes 2 --ranks-per-node 2 --timeout-s 50 -- \
  "$bin/comm_conformance" >"$out" 2>&1 || status=$?
cat "$out"
if [ "$status" -ne 0 ]; then
  echo "mpi-comm: job exited with status $status" >&2
  exit 1
fi
# Rank 0's summary: every check passed.
grep -Eq '^[1-9][0-9]* passed, 0 failed$' "$out" || {
  echo "mpi-comm: no 'N passed, 0 failed' summary" >&2
  exit 1
}
# Each simulated node got its two ranks (node identity reached the ranks).
for node in node0 node1; do
  n=$(grep -c "node $node seed" "$out" || true)
  [ "$n" -eq 2 ] || { echo "mpi-comm: $node ran $n ranks, expected 2" >&2; exit 1; }
done
echo "mpi-comm: ok"
