#!/usr/bin/env bash
# What a new user does from docs/guide/install.md: install SCR once with
# ci/install into a fresh prefix, check the installed tree (the tools run,
# the man pages render, the completions load), then build and run an
# application in each language against that prefix: every part
# ci/user/*.sh. Ends with "user-install: N passed, M failed" (N and M count
# the tree's checks and the parts); exits non-zero when any failed.
#
# The contract of a part (ci/user/<name>.sh; ci/user/lib.bash has helpers):
# - It is run as `bash ci/user/<name>.sh`, in its own empty directory, with
#     INSTALL  the installed prefix (bin, include, lib, share); read only
#     WORK     that directory, the part's own (builds, prefixes, nodes)
#     REPO     the repository's root; read only
#   and the rest of the CI environment (ci/env.sh is sourced by lib.bash).
# - It builds against $INSTALL only (not against the build tree), the way
#   the guide says, and runs its program under `timeout 120 mpirun -np 4`
#   on four simulated nodes (lib.bash's nodes_run): a first launch
#   checkpoints with a scheme that survives the loss of a node and
#   SCR_FLUSH=0; one node's directory is removed; a second launch must
#   restart from the cache and its program check every byte it reads back.
# - It prints one line per step, "PASS what" or "FAIL what (exit N)" with
#   the last lines of that step's output, then "<name>: N passed, M failed".
# - It exits 0 when every step passed, non-zero otherwise. The whole part
#   is bounded (600 s); it needs nothing ci/setup does not install,
#   besides packages from the registries (python.sh: mpi4py from PyPI).
set -uo pipefail
cd "$(dirname "$0")/../.."
repo="$(pwd)"
. ci/env.sh

work="$(mktemp -d "${TMPDIR:-/tmp}/scr-user-install.XXXXXX")"
trap 'rm -rf "$work"' EXIT
install="$work/install"
passed=0
failed=0

# result NAME RC LOG SECONDS: count a check and print it.
result() {
  if [ "$2" -eq 0 ]; then
    passed=$((passed + 1)); echo "PASS $1 (${4}s)"
  else
    failed=$((failed + 1)); echo "FAIL $1 (exit $2, ${4}s)"; tail -40 "$3" | sed 's/^/    /'
  fi
}

# check NAME CMD...: one check of the installed tree.
check() {
  local name="$1"; shift
  local log="$work/log.$((passed + failed))" rc=0 t0=$SECONDS
  "$@" >"$log" 2>&1 || rc=$?
  result "$name" "$rc" "$log" $((SECONDS - t0))
}

check "ci/install $install" ci/install "$install"
if [ "$failed" -ne 0 ]; then
  echo "user-install: $passed passed, $failed failed"
  exit 1
fi

expected=(bin/scr bin/scr-harness lib/libscr.so lib/libscr.a include/scr.h include/scrf.h
  lib/pkgconfig/scr.pc lib/cmake/SCR/SCRConfig.cmake lib/cmake/SCR/SCRConfigVersion.cmake
  share/man/man1/scr.1 share/man/man1/scr-postrun.1 share/man/man1/scr-harness.1
  share/man/man1/scr-harness-campaign.1 share/bash-completion/completions/scr
  share/bash-completion/completions/scr-harness share/zsh/site-functions/_scr
  share/zsh/site-functions/_scr-harness share/fish/vendor_completions.d/scr.fish
  share/fish/vendor_completions.d/scr-harness.fish)
every_file() {
  local f missing=0
  for f in "${expected[@]}"; do
    [ -s "$install/$f" ] || { echo "missing: $f"; missing=1; }
  done
  return "$missing"
}
check "every file in place" every_file
# No debug information left: readelf lists no .debug_* section (but
# .debug_gdb_scripts, a few bytes that rustc puts in the loaded image to
# name its debugger pretty-printers).
stripped() {
  local f
  for f in bin/scr bin/scr-harness lib/libscr.so lib/libscr.a; do
    if readelf -S -W "$install/$f" | grep -E '\] \.debug_' | grep -vq '\.debug_gdb_scripts'; then
      echo "$f has debug sections"; return 1
    fi
  done
}
check "binaries and libraries stripped" stripped
check "scr --version" bash -c "'$install/bin/scr' --version | grep -Eq '^scr [0-9]+\.[0-9]+\.[0-9]+'"
check "scr-harness --version" bash -c "'$install/bin/scr-harness' --version | grep -Eq '^scr-harness [0-9]'"
# man renders the page (nroff through man's pipeline) with its sections.
renders() {
  local out
  out="$(MANPAGER=cat MANWIDTH=80 "$@")" || return 1
  # Here-strings, not pipes: under pipefail, `printf | grep -q` fails with
  # 141 when grep exits before printf has written the whole page (SIGPIPE).
  sed -n 1,20p <<<"$out"
  grep -q '^NAME' <<<"$out" && grep -q '^SYNOPSIS' <<<"$out"
}
check "man -l share/man/man1/scr.1 renders" renders man -l "$install/share/man/man1/scr.1"
check "MANPATH=share/man man scr-postrun renders" env MANPATH="$install/share/man" bash -c \
  "$(declare -f renders); renders man scr-postrun"
# SCR 3.1's command names: links that run their subcommands, man pages that
# are their subcommands'.
check "scr_glob_hosts (SCR 3.1's name) runs scr glob-hosts" bash -c \
  "[ \"\$('$install/bin/scr_glob_hosts' --count --hosts 'atlas[3,5-7,9-11]')\" = 7 ]"
check "MANPATH=share/man man scr_halt renders scr-halt's page" env MANPATH="$install/share/man" bash -c \
  "$(declare -f renders); renders man scr_halt && MANPAGER=cat MANWIDTH=80 man scr_halt | grep -q 'scr-halt'"
check "bash loads the completions of scr" bash -c \
  ". '$install/share/bash-completion/completions/scr' && complete -p scr"
# zsh: compinit finds both functions on fpath (their #compdef lines) and
# binds them to the commands, in a shell with no user configuration.
zsh_binds() {
  local out
  out="$(ZDOTDIR="$work" zsh -f -c "fpath=('$install/share/zsh/site-functions' \$fpath)
    autoload -Uz compinit && compinit -u -d '$work/zcompdump'
    print -r -- \"scr=\${_comps[scr]} scr-harness=\${_comps[scr-harness]}\"")" || return 1
  echo "$out"
  [ "$out" = "scr=_scr scr-harness=_scr-harness" ]
}
check "zsh loads the completions of scr and scr-harness" zsh_binds
# fish answers a completion request without a terminal (complete -C):
# the subcommands of each tool, and an option of one of them.
fish_completes() {
  local out
  out="$(XDG_CONFIG_HOME="$work/fish-config" fish -N -c "
    source '$install/share/fish/vendor_completions.d/scr.fish'
    source '$install/share/fish/vendor_completions.d/scr-harness.fish'
    complete -C 'scr '; complete -C 'scr-harness camp'; complete -C 'scr index --'")" || return 1
  sed -n 1,40p <<<"$out"
  grep -q '^flush' <<<"$out" && grep -q '^index' <<<"$out" &&
    grep -q '^campaign' <<<"$out" && grep -q '^--prefix' <<<"$out"
}
check "fish completes the subcommands and options of scr and scr-harness" fish_completes

for part in ci/user/*.sh; do
  name="$(basename "$part" .sh)"
  mkdir -p "$work/$name"
  log="$work/$name.log"
  t0=$SECONDS
  rc=0
  (cd "$work/$name" && INSTALL="$install" WORK="$work/$name" REPO="$repo" \
    timeout 600 bash "$repo/$part") >"$log" 2>&1 || rc=$?
  # A part's output is short and says itself what failed: all of it.
  sed 's/^/  | /' "$log"
  if [ "$rc" -eq 0 ]; then
    passed=$((passed + 1)); echo "PASS part $name ($((SECONDS - t0))s)"
  else
    failed=$((failed + 1)); echo "FAIL part $name (exit $rc, $((SECONDS - t0))s)"
  fi
done

echo "user-install: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
