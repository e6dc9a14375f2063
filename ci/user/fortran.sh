#!/usr/bin/env bash
# A Fortran application (testing/fortran/ckpt_restart.f90: include
# 'scrf.h') built with mpifort and pkg-config against the installed tree,
# with XOR on four simulated nodes; one node is lost and the next launch
# restarts from the cache, the program checking every value each rank wrote.
# The contract of a part: ci/tests.d/user-install.sh.
set -uo pipefail
. "$REPO/ci/user/lib.bash"
export SCR_COPY_TYPE=XOR
export PKG_CONFIG_PATH="$INSTALL/lib/pkgconfig"

build() {
  # shellcheck disable=SC2046
  mpifort -O2 -Wall -o "$WORK/ckpt_restart" "$REPO/testing/fortran/ckpt_restart.f90" \
    $(pkg-config --cflags --libs scr)
}
check "mpifort ckpt_restart.f90 (scrf.h) \$(pkg-config --cflags --libs scr)" build

check "launch 1: 3 checkpoints, XOR over 4 nodes, no flush" nodes_run run "$WORK/ckpt_restart" write
check "launch 1 flushed nothing to the prefix" no_flushed_checkpoint run
lose_node run 3
check "launch 2: restart from ckpt.3 after losing n3, every value checked" \
  nodes_run run "$WORK/ckpt_restart" read
check "node n3's files were rebuilt in its cache" holds_files run 3
finish
