#!/usr/bin/env bash
# The Python module (python/, issue 18) as a user installs and runs it.
# Environment:
#   INSTALL  an install prefix made by ci/install:
#            INSTALL/lib/libscr.so, INSTALL/include/scr.h
#   WORK     an empty scratch directory
#   REPO     the repository root
# Makes a venv in WORK, pip-installs mpi4py and the module from a copy of
# REPO/python (pip builds in the source tree; REPO stays clean), runs the
# module's unit tests, then python/examples/checkpoint_restart.py under
# mpirun -np 4 on four simulated nodes with XOR and no flush, losing a node
# before each of two restarts that must come back bit-exact from the cache
# (and once with PARTNER), and one rank raising inside a checkpoint block.
# Ends with "python: N passed, M failed"; exits non-zero when any failed.
set -uo pipefail
: "${INSTALL:?set INSTALL to an install prefix (ci/install PREFIX)}"
: "${WORK:?set WORK to an empty scratch directory}"
: "${REPO:?set REPO to the repository root}"
cd "$REPO" || exit 1
. ci/env.sh

passed=0
failed=0
n=0

# check NAME COMMAND...: run a step with its output in a log, count it.
check() {
  local name="$1"; shift
  n=$((n + 1))
  local log="$WORK/log.$n"
  local rc=0
  "$@" >"$log" 2>&1 || rc=$?
  if [ "$rc" -eq 0 ]; then
    passed=$((passed + 1)); echo "PASS $name"
  else
    failed=$((failed + 1)); echo "FAIL $name (exit $rc)"; sed 's/^/    /' "$log" | tail -40
  fi
}

# expect LOG PATTERN...: every pattern (grep -E) is in the last step's log.
last_log() { echo "$WORK/log.$n"; }
expect() {
  local log="$1"; shift
  local p
  for p in "$@"; do
    grep -Eq -- "$p" "$log" || { echo "missing in the output: $p"; return 1; }
  done
}

venv="$WORK/venv"
py="$venv/bin/python"
install_module() {
  local t0=$SECONDS
  python3 -m venv "$venv" || return 1
  cp -r "$REPO/python" "$WORK/python-src" || return 1
  # mpi4py is a dependency of the module; pip's cache (~/.cache/pip) makes
  # a second install local. Its binary wheel finds the system's Open MPI.
  "$venv/bin/pip" install --quiet --disable-pip-version-check "$WORK/python-src" || return 1
  echo "venv + pip install: $((SECONDS - t0)) s"
}
check "pip install mpi4py and ./python into a venv" install_module
grep -h "venv + pip install" "$(last_log)"
export SCR_LIBRARY="$INSTALL/lib/libscr.so"
if [ "$failed" -ne 0 ] || [ ! -f "$SCR_LIBRARY" ]; then
  [ -f "$SCR_LIBRARY" ] || { echo "FAIL no $SCR_LIBRARY (make INSTALL with ci/install)"; failed=$((failed + 1)); }
  echo "python: $passed passed, $failed failed"
  exit 1
fi

# unit tests need no mpirun (the phase tests start singleton MPI processes).
unit_tests() {
  # From WORK, so that the installed package is the one imported.
  (cd "$WORK" && "$py" -m unittest discover -s "$WORK/python-src/tests" -v) || return 1
  # With the library, its install prefix and mpi4py at hand, every test
  # must have run (only a libscr installed system-wide may skip one).
  ! grep -E "skipped '(libscr.so not available|needs libscr.so|library not in|no scr.pc|no scr.h|SCR_CHECKPOINT)" "$(last_log)"
}
check "unit tests (python -m unittest discover -s python/tests)" unit_tests
grep -E "^Ran [0-9]+ tests|^OK|^FAILED" "$(last_log)" | sed 's/^/    /'

example="$REPO/python/examples/checkpoint_restart.py"
prefix="$WORK/prefix"
nodes="$WORK/nodes"
mkdir -p "$prefix" "$nodes"
export SCR_JOB_ID="python-user" SCR_COPY_TYPE=XOR SCR_SET_SIZE=4 \
  SCR_CACHE_SIZE=2 SCR_FLUSH=0

# run_py SCRIPT ARGS...: a Python program on 4 ranks, rank i on simulated
# node n<i> ($nodes/n<i>), in the prefix directory $prefix.
run_py() {
  node_contexts "$nodes" "$py" "$@"
  mkdir -p "$prefix" "$nodes"
  (cd "$prefix" && SCR_PREFIX="$prefix" timeout 120 mpirun --oversubscribe \
    -x SCR_LIBRARY -x SCR_PREFIX -x SCR_JOB_ID -x SCR_COPY_TYPE -x SCR_SET_SIZE \
    -x SCR_CACHE_SIZE -x SCR_FLUSH "${CONTEXTS[@]}")
}
# run ARGS...: the example.
run() { run_py "$example" "$@"; }

# no_flush: with SCR_FLUSH=0 the prefix holds no dataset, only SCR's metadata.
no_flush() {
  local found
  found="$(cd "$prefix" && find . -name 'rank_*.dat' | head -3)"
  [ -z "$found" ] || { echo "files in the prefix: $found"; return 1; }
}

first_run() {
  run --steps 6 || return 1
  expect "$(last_log)" "no checkpoint to restart from" "wrote ckpt.2, ckpt.4, ckpt.6 "
}
check "first run: ckpt.2, ckpt.4, ckpt.6 into the cache" first_run
check "SCR_FLUSH=0: no checkpoint file in the prefix" no_flush

rm -rf "$nodes/n2"
restart_1() {
  run --steps 6 || return 1
  expect "$(last_log)" "restarted from ckpt.6 \(step 6\): 4 ranks verified 1048576 bytes, bit-exact" \
    "wrote ckpt.8, ckpt.10, ckpt.12 "
}
check "restart 1 after losing n2: ckpt.6 rebuilt by XOR, bit-exact" restart_1

rm -rf "$nodes/n0"
restart_2() {
  run --steps 2 || return 1
  expect "$(last_log)" "restarted from ckpt.12 \(step 12\): 4 ranks verified 1048576 bytes, bit-exact" \
    "wrote ckpt.14 "
}
check "restart 2 after losing n0: ckpt.12 rebuilt by XOR, bit-exact" restart_2
check "SCR_FLUSH=0: still no checkpoint file in the prefix" no_flush

# The example's own check: data made from another seed differs, so the
# restart reports the first differing byte and the run exits non-zero.
wrong_data() {
  local rc=0
  run --steps 0 --seed 2 || rc=$?
  [ "$rc" -ne 0 ] || { echo "the run exited 0 although the data differs"; return 1; }
  expect "$(last_log)" "restart from ckpt.14 FAILED" \
    "rank [0-3]: ckpt.14: ckpt.14/rank_[0-3].dat: byte 0 is 0x[0-9a-f]{2}, expected 0x[0-9a-f]{2}"
}
check "a restart that reads other bytes fails, naming the byte" wrong_data

# The same with PARTNER copies: a lost node's files come from its partner.
prefix="$WORK/partner/prefix"
nodes="$WORK/partner/nodes"
SCR_COPY_TYPE=PARTNER check "PARTNER: first run" first_run
rm -rf "$nodes/n3"
SCR_COPY_TYPE=PARTNER check "PARTNER: restart after losing n3, bit-exact" restart_1

# One rank raises inside a checkpoint block: every rank still completes
# the phase (a hang would hit mpirun's timeout), and the restart in a new
# launch comes from the checkpoint before it.
prefix="$WORK/raises/prefix"
nodes="$WORK/raises/nodes"
raises() {
  run_py "$WORK/python-src/tests/mpi_rank_raises.py" "$1" || return 1
  expect "$(last_log)" "^mpi_rank_raises $1: ok$"
}
check "an exception on rank 1 in a checkpoint block: all ranks complete, all_valid False" raises write
check "the next launch restarts from the checkpoint before it" raises read

# docs/guide/python.md quotes the example whole: the quote is the file.
doc_quotes_example() {
  awk '/^```python$/ {inside = 1; block = ""; next}
       /^```$/ && inside {inside = 0; if (block ~ /^#!\/usr\/bin\/env python3/) printf "%s", block; next}
       inside {block = block $0 "\n"}' "$REPO/docs/guide/python.md" >"$WORK/quoted.py"
  diff -u "$example" "$WORK/quoted.py"
}
check "docs/guide/python.md quotes the example as it is" doc_quotes_example

echo "python: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
