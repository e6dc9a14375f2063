#!/usr/bin/env bash
# Injection points (scr/src/fault.rs, the hook) must cost nothing unless the
# `fault-injection` feature is on, and must really act when it is (the
# runtime they call, plans/kills/fault log, is the faultrt crate).
#
# 1. Release build of scr/examples/fault_point_probe.rs WITHOUT the feature:
#    the point's name is not in the binary, no scr::fault or faultrt symbol
#    is linked, and the loop with the point compiles to the same
#    instructions as the loop without it (same address after folding, or
#    identical disassembly).
# 2. The same probe WITH the feature: the name, `scr::fault::hit` and the
#    runtime are there, and each action happens: kill (137), exit:CODE,
#    error (3), delay, kill-node (kills the same-node peers of the job,
#    spares others), a bad plan exits 86; the fault log records the firing.
#    None of that depends on optimization, so this build is a debug one
#    with workspace code unoptimized (a second optimized compile of scr
#    took about 85 s of this step; this one about 20 s).
# 3. The unit tests of scr::fault with the feature, and of faultrt.
set -euo pipefail
cd "$(dirname "$0")/../.."
. ci/env.sh

probe_build() { # release|debug [cargo args...]
  local profile=$1
  shift
  cargo build --quiet -p scr --no-default-features --example fault_point_probe "$@"
  probe=target/$profile/examples/fault_point_probe
}
name=probe.xor.chunk

fail() { echo "fault-points-free: FAIL: $*" >&2; exit 1; }

body() { # normalised disassembly of one function (addresses stripped)
  objdump -d --no-show-raw-insn "$probe" --disassemble="$1" \
    | awk -v f="<$1>:" '$0 ~ f {on=1; next} on && /^$/ {exit} on' \
    | sed -E 's/^ *[0-9a-f]+:\s*//; s/[0-9a-f]{4,}( <[^>]*>)?/ADDR/g'
}

echo "-- without the feature (release)"
probe_build release --release
[ -x "$probe" ] || fail "probe not built"
if grep -q -a "$name" "$probe"; then fail "point name '$name' found in the binary"; fi
if grep -q -a "SCR_FAULT_PLAN" "$probe"; then fail "SCR_FAULT_PLAN found in the binary"; fi
# nm goes to a file first: with pipefail, `nm | grep -q` fails on SIGPIPE.
nm -C "$probe" >"$probe.nm"
if grep -q "scr::fault::" "$probe.nm"; then fail "scr::fault symbols linked"; fi
if grep -q "faultrt::" "$probe.nm"; then fail "faultrt (the fault runtime) linked"; fi
with=$(awk '$3 == "probe_with_point" {print $1}' "$probe.nm")
without=$(awk '$3 == "probe_without_point" {print $1}' "$probe.nm")
[ -n "$with" ] && [ -n "$without" ] || fail "probe symbols missing"
if [ "$with" = "$without" ]; then
  echo "loops with and without the point were folded into one function (both at 0x$with)"
else
  [ "$(body probe_with_point)" = "$(body probe_without_point)" ] \
    || fail "the loop with a disabled point compiles differently from the loop without"
  echo "loops with and without the point have identical instructions"
fi
[ "$("$probe" 8)" = "fault_point_probe: 8 iterations ok" ] || fail "probe does not run"
SCR_FAULT_PLAN="$name#1=kill" "$probe" 8 >/dev/null || fail "a plan must be ignored without the feature"
echo "no string, no symbol, no instruction: ok"

echo "-- with the feature (debug)"
probe_build debug --features fault-injection --config profile.dev.opt-level=0
grep -q -a "$name" "$probe" || fail "point name missing with the feature"
nm -C "$probe" >"$probe.nm"
grep -q "scr::fault::hit" "$probe.nm" || fail "scr::fault::hit missing with the feature"
grep -q "faultrt::" "$probe.nm" || fail "faultrt (the fault runtime) missing with the feature"
grep -q -a "SCR_FAULT_PLAN" "$probe" || fail "SCR_FAULT_PLAN missing with the feature"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
expect_status() { # expected-status plan [args...]
  local want=$1 plan=$2 got=0
  shift 2
  SCR_FAULT_PLAN="$plan" SCR_FAULT_LOG="$tmp/log" "$probe" "$@" >"$tmp/out" 2>"$tmp/err" || got=$?
  [ "$got" = "$want" ] || { cat "$tmp/err" >&2; fail "plan '$plan': exit $got, expected $want"; }
}
expect_status 0 "" 8
expect_status 0 "other.point=kill" 8
# The probe passes rank = iteration % 4: each rank counts its own hits.
expect_status 137 "$name#3=kill" 16
grep -q "\"point\":\"$name\"" "$tmp/log" || fail "fault log lacks the firing"
expect_status 0 "$name#3=kill" 8     # each rank reaches the point twice
expect_status 7 "$name#2@rank:1=exit:7" 8
expect_status 0 "$name@rank:9=exit:7" 8
expect_status 3 "$name#4=error:enospc" 16
grep -q "injected fault at point $name (hit 4)" "$tmp/err" || fail "error fault not reported"
start=$(date +%s%N)
expect_status 0 "$name#1+=delay:50" 8
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$elapsed_ms" -ge 400 ] || fail "delay:50 on 8 hits took only ${elapsed_ms} ms"
expect_status 86 "$name=explode" 8
grep -q "unknown action" "$tmp/err" || fail "bad plan not explained"
echo "[{\"point\":\"$name\",\"hit\":2,\"action\":\"exit\",\"code\":9}]" >"$tmp/plan.json"
expect_status 9 "$tmp/plan.json" 8

# kill-node: the process on node n1 that reaches the point a second time
# (after 300 ms) fires; its peer on n1 (same job, one hit only) must die with
# it; a process on n2 and one on n1 of another job live on.
run_probe() { # node job iterations sleep-before-ms
  SCR_NODE_NAME=$1 SCR_FAULT_JOB=$2 \
    SCR_FAULT_PLAN="$name#2@node:n1=kill-node" "$probe" "$3" "$4" 3000 >/dev/null 2>&1
}
run_probe n1 jobA 1 0 & peer=$!
run_probe n2 jobA 8 0 & other_node=$!
run_probe n1 jobB 1 0 & other_job=$!
sleep 0.2
killer_status=0; run_probe n1 jobA 8 300 || killer_status=$?
peer_status=0; wait "$peer" || peer_status=$?
other_node_status=0; wait "$other_node" || other_node_status=$?
other_job_status=0; wait "$other_job" || other_job_status=$?
[ "$killer_status" = 137 ] || fail "kill-node: firing rank exit $killer_status, expected 137"
[ "$peer_status" = 137 ] || fail "kill-node: same-node peer exit $peer_status, expected 137"
[ "$other_node_status" = 0 ] || fail "kill-node: other node's process exit $other_node_status"
[ "$other_job_status" = 0 ] || fail "kill-node: other job's process exit $other_job_status"
echo "every action happens: ok"

echo "-- unit tests with the feature"
scr_lib_tests_without_logdb fault
cargo test --quiet -j2 -p faultrt
echo "fault-points-free: ok"
