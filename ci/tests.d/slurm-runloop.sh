# The run loop on a real SLURM cluster (ci/slurm-cluster: 5 nodes, each in
# its own namespaces with its own hostname and /dev/shm): `salloc -N5
# --no-kill` (one spare), scr_app with XOR over 4 nodes, node2 killed
# mid-run; the loop must find it down, relaunch on the 3 survivors plus the
# spare, the library rebuild in place, and every byte verify. Under
# `scr srun`, `scr run -- mpirun`, and a silent failure (link down first)
# that must not hang: the launch is bounded, killed, the node reported down.
# Node identity comes from the real hostnames: SCR_NODE_NAME is never set.
set -euo pipefail
cd "$(dirname "$0")/../.."
. ci/env.sh
why=$(ci/slurm-cluster why-not)
if [ -n "$why" ]; then
  if [ "${SCR_SLURM_REQUIRED:-0}" = 1 ]; then
    echo "slurm-runloop: FAILED: the SLURM test cluster cannot start here: $why" >&2
    exit 1
  fi
  echo "slurm-runloop: SKIPPED, NOT RUN: the SLURM test cluster cannot start here: $why" >&2
  echo "slurm-runloop: (set SCR_SLURM_REQUIRED=1 to make this a failure)" >&2
  exit 0
fi
cargo build --quiet -p testing --bin scr_app
cargo build --quiet -p scr --bin scr
SCR="$PWD/target/debug/scr"
APP="$PWD/target/debug/scr_app"
WORK=$(mktemp -d /var/tmp/scr-slurm-runloop.XXXXXX)   # every node sees /var/tmp
trap 'ci/slurm-cluster stop >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
unset SCR_NODE_NAME SCR_NODE_ROOT
ci/slurm-cluster start
eval "$(ci/slurm-cluster env)"
NET=10.250.16.0/24
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp
export OMPI_MCA_btl_tcp_if_include=$NET OMPI_MCA_oob_tcp_if_include=$NET

fail() { echo "slurm-runloop: FAILED ($1): $2" >&2; tail -30 "$3" >&2 || true; exit 1; }

# scenario NAME HOW LAUNCH...: run the loop, `HOW` node2 after the second
# checkpoint, check the relaunch and the bytes.
scenario() {
  local name=$1 how=$2; shift 2
  local d="$WORK/$name" t0 t1
  mkdir -p "$d"
  ci/slurm-cluster wait-idle
  t0=$(date +%s)
  (
    # Bounded: 30 s for the second checkpoint, then the fault.
    for _ in $(seq 1 300); do
      n=$(grep -c CHECKPOINT_END "$d/.scr/log" 2>/dev/null || true)
      [ "${n:-0}" -ge 2 ] && break
      sleep 0.1
    done
    ci/slurm-cluster "$how" node2
  ) &
  local killer=$!
  set +e
  (cd "$d" && SCR_PREFIX="$d" SCR_COPY_TYPE=XOR SCR_SET_SIZE=4 SCR_FLUSH=0 SCR_LOG_ENABLE=1 SCR_RUNS=3 \
    timeout 240 salloc -N5 --no-kill "$SCR" "$@" "$APP" --checkpoints 8 --step-ms 400) >"$d/out" 2>&1
  local rc=$?
  set -e
  wait "$killer"
  t1=$(date +%s)
  [ $rc -eq 0 ] || fail "$name" "scr exited $rc" "$d/out"
  grep -q "SCR_APP restarted name=ckpt\.[0-9]* source=rebuilt" "$d/out" \
    || fail "$name" "the relaunch did not rebuild a checkpoint in place" "$d/out"
  grep -q "mismatches=0 unreadable=0" "$d/out" || fail "$name" "bytes did not verify" "$d/out"
  grep -q "status=ok" "$d/out" || fail "$name" "the relaunch did not finish" "$d/out"
  grep -q 'event=NODE_FAIL, note="node2: ' "$d/.scr/log" || fail "$name" "no NODE_FAIL for node2" "$d/.scr/log"
  grep -q 'event=RUN_START, note="launch 2 of at most 3 on node1,node5,node3,node4"' "$d/.scr/log" \
    || fail "$name" "launch 2 not on the survivors plus the spare, in place" "$d/.scr/log"
  grep -q 'event=RUN_END, note="launch 2: finished"' "$d/.scr/log" || fail "$name" "no RUN_END of launch 2" "$d/.scr/log"
  grep -q "host=node1" "$d/.scr/log" || fail "$name" "the library did not log the real hostname" "$d/.scr/log"
  echo "slurm-runloop: $name ok in $((t1 - t0)) s: $(grep -E 'RUN_END|NODE_FAIL' "$d/.scr/log" | sed 's/.*note=//' | tr '\n' ' ')"
  ci/slurm-cluster start-node node2
}

scenario srun-kill kill-node srun --watchdog 120 --check-timeout 5 -- -N4 -n8
scenario mpirun-kill kill-node run --watchdog 120 --check-timeout 5 -- mpirun -np 8 --npernode 2
# A silent failure can hang mpirun forever: the watchdog must end it.
scenario mpirun-silent cut-node run --watchdog 25 --check-timeout 5 -- mpirun -np 8 --npernode 2
echo "slurm-runloop: ok"
