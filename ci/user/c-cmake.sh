#!/usr/bin/env bash
# A C application built with CMake's find_package(SCR) against the installed
# tree (examples/c-cmake), checkpointing with XOR on four simulated nodes;
# one node is lost and the next launch restarts from the cache, checking
# every byte; then the same with SCR::scr_static (libscr.a). The contract
# of a part: ci/tests.d/user-install.sh.
set -uo pipefail
. "$REPO/ci/user/lib.bash"
export SCR_COPY_TYPE=XOR

build="$WORK/build"
check "cmake configure: find_package(SCR 3.1) in $INSTALL" \
  cmake -S "$REPO/examples/c-cmake" -B "$build" -DCMAKE_PREFIX_PATH="$INSTALL" -DCMAKE_BUILD_TYPE=Release
check "cmake build: target_link_libraries(heat SCR::scr)" cmake --build "$build"
# IMPORTED_NO_SONAME: the program names libscr.so, found through its RPATH.
check "heat needs libscr.so by name, found in $INSTALL/lib" \
  bash -c "readelf -d '$build/heat' | grep -q 'NEEDED.*\[libscr.so\]' && env -u LD_LIBRARY_PATH ldd '$build/heat' | grep -q '$INSTALL/lib/libscr.so'"
# SCRConfigVersion.cmake: the same major version and not newer.
wants() {
  mkdir -p "$WORK/v$1"
  printf 'cmake_minimum_required(VERSION 3.16)\nproject(v LANGUAGES C)\nfind_package(SCR %s REQUIRED)\n' "$1" \
    > "$WORK/v$1/CMakeLists.txt"
  cmake -S "$WORK/v$1" -B "$WORK/v$1/build" -DCMAKE_PREFIX_PATH="$INSTALL"
}
check "find_package(SCR 3.0) accepts the installed 3.1" wants 3.0
refused() { ! wants 3.2 && ! wants 4.0; }
check "find_package(SCR 3.2) and (SCR 4.0) are refused" refused

check "launch 1: steps 1..3, XOR over 4 nodes, no flush" nodes_run run "$build/heat" 3
check "launch 1 flushed nothing to the prefix" no_flushed_checkpoint run
lose_node run 2
check "launch 2: restart from step 3 after losing n2, every byte checked" \
  nodes_run run "$build/heat" 5 --expect-restart 3
check "node n2's files were rebuilt in its cache" holds_files run 2

# SCR::scr_static: the same program with libscr.a, which it does not need
# at run time; the same loss and restart.
check "heat_static links libscr.a (no libscr.so needed)" \
  bash -c "test -x '$build/heat_static' && ! readelf -d '$build/heat_static' | grep -q 'libscr.so'"
check "static launch 1: steps 1..3, XOR over 4 nodes" nodes_run static "$build/heat_static" 3
lose_node static 1
check "static launch 2: restart from step 3 after losing n1, every byte checked" \
  nodes_run static "$build/heat_static" 5 --expect-restart 3
check "node n1's files were rebuilt in its cache" holds_files static 1
finish
