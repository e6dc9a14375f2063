# The communicator conformance suite under real MPI, launched on simulated
# nodes by harness's mpirun-sim (bounded wait, whole-job kill on expiry).
set -euo pipefail
cd "$(dirname "$0")/../.."
. ci/env.sh
workspace_bins
bin=target/debug
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# suite NODES RANKS_PER_NODE [mpirun-sim options...]
suite() {
  local nodes=$1 per=$2
  shift 2
  echo "== conformance: $nodes node(s) x $per rank(s) $*"
  local status=0
  "$bin/mpirun-sim" --nodes "$nodes" --ranks-per-node "$per" --timeout-s 25 "$@" -- \
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
  # Node identity reached every rank: each node ran its ranks.
  local i n
  for ((i = 0; i < nodes; i++)); do
    n=$(grep -c "node node$i seed" "$out" || true)
    [ "$n" -eq "$per" ] || { echo "mpi-comm: node$i ran $n ranks, expected $per" >&2; exit 1; }
  done
}

suite 2 2
# 4 KiB pieces: multi-chunk sendrecv, bcast and (interleaved) sparse exchange.
suite 2 2 --env SCR_COMM_CHUNK_BYTES=4096
# An odd size, one rank per node.
suite 3 1
# Sparse exchanges as NBX (synchronous sends, a nonblocking barrier), as
# jobs of scr::comm::mpi::DEFAULT_NBX_RANKS ranks run them; in 4 KiB
# pieces too.
suite 2 2 --env SCR_COMM_NBX_RANKS=1
suite 3 1 --env SCR_COMM_NBX_RANKS=1 --env SCR_COMM_CHUNK_BYTES=4096
echo "mpi-comm: ok"
