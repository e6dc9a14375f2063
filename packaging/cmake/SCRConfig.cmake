# The CMake package of SCR (installed by ci/install as
# PREFIX/lib/cmake/SCR/SCRConfig.cmake; docs/guide/install.md).
#
#   find_package(SCR 3.1 REQUIRED)        # CMAKE_PREFIX_PATH=PREFIX or SCR_DIR=PREFIX/lib/cmake/SCR
#   target_link_libraries(app PRIVATE SCR::scr)          # or SCR::scr_static
#
# SCR::scr is the shared library PREFIX/lib/libscr.so with scr.h and scrf.h
# on its include path; it brings MPI's C target (MPI::MPI_C) along, since
# scr.h includes mpi.h. SCR::scr_static is PREFIX/lib/libscr.a with the
# same headers, MPI and the system libraries the Rust runtime inside it
# needs (defined when libscr.a is installed). Sets SCR_FOUND, SCR_VERSION,
# SCR_INCLUDE_DIRS and SCR_LIBRARIES for projects that do not use targets.

include(CMakeFindDependencyMacro)
find_dependency(MPI COMPONENTS C)

# This file lives in PREFIX/lib/cmake/SCR: the prefix is three levels up,
# so an installed tree can be moved as a whole.
get_filename_component(_scr_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)

if(NOT TARGET SCR::scr)
  if(NOT EXISTS "${_scr_prefix}/lib/libscr.so" OR NOT EXISTS "${_scr_prefix}/include/scr.h")
    set(SCR_FOUND FALSE)
    set(SCR_NOT_FOUND_MESSAGE
        "SCR's CMake package at ${CMAKE_CURRENT_LIST_DIR} has no ${_scr_prefix}/lib/libscr.so or ${_scr_prefix}/include/scr.h: reinstall with ci/install PREFIX")
    return()
  endif()
  add_library(SCR::scr SHARED IMPORTED)
  set_target_properties(SCR::scr PROPERTIES
    IMPORTED_LOCATION "${_scr_prefix}/lib/libscr.so"
    # libscr.so has no SONAME: link it as -lscr so that applications name
    # libscr.so (found through their RPATH), not this absolute path.
    IMPORTED_NO_SONAME TRUE
    INTERFACE_INCLUDE_DIRECTORIES "${_scr_prefix}/include"
    INTERFACE_LINK_LIBRARIES MPI::MPI_C)
endif()

if(NOT TARGET SCR::scr_static AND EXISTS "${_scr_prefix}/lib/libscr.a")
  add_library(SCR::scr_static STATIC IMPORTED)
  # The system libraries are those rustc names for the staticlib
  # (`--print native-static-libs`).
  set_target_properties(SCR::scr_static PROPERTIES
    IMPORTED_LOCATION "${_scr_prefix}/lib/libscr.a"
    IMPORTED_LINK_INTERFACE_LANGUAGES C
    INTERFACE_INCLUDE_DIRECTORIES "${_scr_prefix}/include"
    INTERFACE_LINK_LIBRARIES "MPI::MPI_C;gcc_s;util;rt;pthread;dl;m")
endif()

set(SCR_INCLUDE_DIRS "${_scr_prefix}/include")
set(SCR_LIBRARIES SCR::scr)
unset(_scr_prefix)
