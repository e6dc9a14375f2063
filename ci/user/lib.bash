# Shared by the parts ci/user/*.sh of ci/tests.d/user-install.sh (sourced,
# not run; its name does not end in .sh so the runner does not take it for
# a part). The contract of a part is at the top of user-install.sh.
#
# Gives a part:
#   check NAME CMD...       run a step, print "PASS NAME" or "FAIL NAME (exit N)"
#                           with the last lines of its output, and count it;
#   nodes_run CASE PROG ARGS...
#                           one launch of PROG on 4 ranks, one per simulated
#                           node n0..n3 (SCR_NODE_NAME=n<i>,
#                           SCR_NODE_ROOT=$WORK/CASE/nodes/n<i>), in the
#                           prefix $WORK/CASE/prefix (also its working
#                           directory), under timeout 120; every SCR_*
#                           variable of the environment and those named in
#                           MPI_EXPORT go to every rank;
#   lose_node CASE I        remove node n<I>'s whole directory (cache and control);
#   no_flushed_checkpoint CASE
#                           the prefix holds no checkpoint (so a restart
#                           can only come from the cache);
#   holds_files CASE I      node n<I>'s directory holds files again (rebuilt);
#   finish                  print "<part>: N passed, M failed" and exit 0
#                           only when nothing failed.
# Defaults a part may change: a scheme that survives the loss of a node
# (XOR over the 4 nodes) and no flush, so the restart is from the cache.
: "${INSTALL:?INSTALL: the installation prefix}" "${WORK:?WORK: the directory of this part}" \
  "${REPO:?REPO: the repository}"
. "$REPO/ci/env.sh"
export SCR_COPY_TYPE="${SCR_COPY_TYPE:-XOR}" SCR_SET_SIZE="${SCR_SET_SIZE:-4}" \
  SCR_FLUSH="${SCR_FLUSH:-0}" SCR_CACHE_SIZE="${SCR_CACHE_SIZE:-2}"
MPI_EXPORT="${MPI_EXPORT:-}"
part="$(basename "$0" .sh)"
passed=0
failed=0

check() {
  local name="$1"; shift
  local log="$WORK/log.$((passed + failed))"
  local rc=0
  "$@" >"$log" 2>&1 || rc=$?
  if [ "$rc" -eq 0 ]; then
    passed=$((passed + 1)); echo "PASS $name"
  else
    failed=$((failed + 1)); echo "FAIL $name (exit $rc)"; tail -30 "$log" | sed 's/^/    /'
  fi
}

nodes_run() {
  local case="$1"; shift
  local prefix="$WORK/$case/prefix" nodes="$WORK/$case/nodes"
  mkdir -p "$prefix" "$nodes"
  local xs=() v
  for v in $(compgen -e | grep '^SCR_') $MPI_EXPORT; do xs+=(-x "$v"); done
  node_contexts "$nodes" "$@"
  (cd "$prefix" && SCR_PREFIX="$prefix" SCR_JOB_ID="user-$part-$case" \
    timeout 120 mpirun -np 4 --oversubscribe -x SCR_PREFIX -x SCR_JOB_ID "${xs[@]}" "${CONTEXTS[@]}")
}

lose_node() {
  rm -rf "$WORK/$1/nodes/n$2"
}

no_flushed_checkpoint() {
  local index="$WORK/$1/prefix/.scr/index.scr"
  if [ -e "$index" ]; then
    echo "$index exists: a checkpoint was flushed"
    "$INSTALL/bin/scr" index --prefix "$WORK/$1/prefix" --list || true
    return 1
  fi
}

holds_files() {
  local n
  n="$(find "$WORK/$1/nodes/n$2" -type f 2>/dev/null | wc -l)"
  echo "node n$2 holds $n files"
  [ "$n" -gt 0 ]
}

finish() {
  echo "$part: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit
}
