#!/usr/bin/env bash
# The Rust quick start as a user follows it (docs/guide/rust.md): a fresh
# cargo project outside the workspace that depends on the `scr` crate by
# path, its src/main.rs copied from scr/examples/checkpoint_restart.rs,
# built, then run under mpirun -np 4 on four simulated nodes
# (SCR_NODE_NAME=n<i>, SCR_NODE_ROOT=$WORK/nodes/n<i>) with XOR and no
# flush: a checkpointing run, one node's cache removed, and two restarts
# that must each come from the cache (nothing is ever flushed) bit-exact.
#
# Contract (ci/tests.d/user-install.sh runs every ci/user/*.sh):
#   REPO     the repository root
#   WORK     an empty scratch directory
#   INSTALL  an install prefix (not used: a Rust user needs only cargo)
# Prints "N passed, M failed"; exits non-zero when any failed.
#
# Two things differ from a user's first build, both only so that CI reuses
# what ci/test has already compiled (the same crate versions, features and
# profile give the same artifacts): the workspace's Cargo.lock is copied in
# (the same versions, and no registry access), and the build uses the
# workspace's target directory and dev profile. The build's seconds and
# the crates it compiled are printed.
set -uo pipefail
: "${REPO:?REPO: the repository root}" "${WORK:?WORK: an empty scratch directory}"
cd "$REPO"
. ci/env.sh

passed=0
failed=0
pass() { passed=$((passed + 1)); echo "PASS $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1"; [ -z "${2:-}" ] || sed 's/^/    /' "$2" | tail -30; }
finish() { echo "rust: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }

app="$WORK/app"
target="${CARGO_TARGET_DIR:-$REPO/target}"
cargo new --quiet --vcs none --name scr_quickstart "$app" || { fail "cargo new"; finish; }
printf 'scr = { path = "%s/scr" }\n' "$REPO" >> "$app/Cargo.toml"
cp "$REPO/scr/examples/checkpoint_restart.rs" "$app/src/main.rs"
cp "$REPO/Cargo.lock" "$app/Cargo.lock"

# The workspace's dev profile, read from its Cargo.toml (every key = value
# of [profile.dev] and of each [profile.dev.package.*] section, "*" and
# the named proc macros) so the two cannot drift: one setting different
# recompiles every dependency (74 crates, 254 s).
profile=()
while IFS= read -r setting; do profile+=(--config "$setting"); done < <(
  awk '/^\[/ { sect = $0; next }
       sect == "[profile.dev]" && /^[a-z-]+ *=/ { sub(/ *= */, "="); print "profile.dev." $0 }
       sect ~ /^\[profile\.dev\.package\./ && /^[a-z-]+ *=/ {
         p = sect; sub(/^\[/, "", p); sub(/\]$/, "", p); sub(/ *= */, "="); print p "." $0 }' \
    "$REPO/Cargo.toml")
[ "${#profile[@]}" -ge 4 ] || { fail "read the dev profile from $REPO/Cargo.toml"; finish; }

log="$WORK/build.log"
start=$(date +%s)
if (cd "$app" && CARGO_TARGET_DIR="$target" cargo build --offline "${profile[@]}" \
      --config 'profile.dev.package.scr.opt-level=1') >"$log" 2>&1; then
  secs=$(( $(date +%s) - start ))
  compiled=$(grep -c '^ *Compiling ' "$log")
  pass "build: fresh project, scr by path ($compiled crates compiled, $secs s)"
  grep '^ *Compiling ' "$log" | sed 's/^ *Compiling /    compiled: /'
else
  fail "build: fresh project, scr by path" "$log"
  finish
fi
bin="$target/debug/scr_quickstart"

# run NAME EXPECT...: one mpirun of 4 ranks on nodes n0..n3 in the prefix
# directory; passes when it exits 0 and prints every EXPECT line.
run() {
  local name="$1"; shift
  local prefix="$WORK/prefix" out="$WORK/run.$passed.$failed"
  mkdir -p "$prefix"
  node_contexts "$WORK/nodes" "$bin" 6
  local rc=0
  (cd "$prefix" && SCR_PREFIX="$prefix" SCR_JOB_ID=rust-quickstart SCR_COPY_TYPE=XOR \
    SCR_SET_SIZE=4 SCR_FLUSH=0 timeout 120 mpirun --oversubscribe \
    -x SCR_PREFIX -x SCR_JOB_ID -x SCR_COPY_TYPE -x SCR_SET_SIZE -x SCR_FLUSH "${CONTEXTS[@]}") \
    >"$out" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    fail "$name (exit $rc)" "$out"
    return
  fi
  local want
  for want in "$@"; do
    if ! grep -qxF "$want" "$out"; then
      fail "$name: no line \"$want\"" "$out"
      return
    fi
  done
  pass "$name"
}

# Rank r writes 64 KiB + 1000 r bytes: 4 ranks verify 268144 bytes.
run "first run: no restart, checkpoints ckpt.2 ckpt.4 ckpt.6" \
  "no checkpoint to restart from: starting at step 0" \
  "checkpoint ckpt.2 written" "checkpoint ckpt.4 written" "checkpoint ckpt.6 written" \
  "done at step 6"
rm -rf "$WORK/nodes/n2"
run "restart after losing node n2: ckpt.6 rebuilt from XOR, every byte checked" \
  "restarted from ckpt.6 at step 6: 4 ranks verified 268144 bytes" \
  "checkpoint ckpt.12 written" "done at step 12"
run "second restart from cache: ckpt.12, every byte checked" \
  "restarted from ckpt.12 at step 12: 4 ranks verified 268144 bytes" \
  "checkpoint ckpt.18 written" "done at step 18"
if [ -n "$(ls -A "$WORK/prefix" 2>/dev/null | grep -v '^\.scr$')" ]; then
  fail "nothing flushed (SCR_FLUSH=0): the restarts came from the cache"
  ls -la "$WORK/prefix" | sed 's/^/    /'
else
  pass "nothing flushed (SCR_FLUSH=0): the restarts came from the cache"
fi
finish
