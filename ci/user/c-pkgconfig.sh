#!/usr/bin/env bash
# A C application built with mpicc and pkg-config against the installed
# tree (examples/c-cmake/heat.c, the CMake example's program), with PARTNER
# copies on four simulated nodes; one node is lost and the next launch
# restarts from the cache, checking every byte. The contract of a part:
# ci/tests.d/user-install.sh.
set -uo pipefail
. "$REPO/ci/user/lib.bash"
export SCR_COPY_TYPE=PARTNER
export PKG_CONFIG_PATH="$INSTALL/lib/pkgconfig"

check "pkg-config knows scr $(sed -n 's/^#define SCR_VERSION "v\(.*\)"$/\1/p' "$INSTALL/include/scr.h")" \
  pkg-config --exact-version="$(sed -n 's/^#define SCR_VERSION "v\(.*\)"$/\1/p' "$INSTALL/include/scr.h")" scr
build() {
  # shellcheck disable=SC2046
  mpicc -std=c99 -Wall -Wextra -Werror -O2 -o "$WORK/heat" "$REPO/examples/c-cmake/heat.c" \
    $(pkg-config --cflags --libs scr)
}
check "mpicc heat.c \$(pkg-config --cflags --libs scr)" build
check "heat finds libscr.so without LD_LIBRARY_PATH" \
  bash -c "env -u LD_LIBRARY_PATH ldd '$WORK/heat' | grep -q '$INSTALL/lib/libscr.so'"

check "launch 1: steps 1..4, PARTNER over 4 nodes, no flush" nodes_run run "$WORK/heat" 4
check "launch 1 flushed nothing to the prefix" no_flushed_checkpoint run
lose_node run 1
check "launch 2: restart from step 4 after losing n1, every byte checked" \
  nodes_run run "$WORK/heat" 6 --expect-restart 4
check "node n1's files were rebuilt in its cache" holds_files run 1
finish
