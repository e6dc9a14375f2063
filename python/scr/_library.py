"""Finding and loading libscr.so, the SCR C library (scr.h, SCR 3.1 API).

Search order, first match wins:

1. ``SCR_LIBRARY``: the path of the library file. When set, it is the only
   place tried: a wrong explicit choice is an error, not a silent fallback.
2. ``SCR_PREFIX_INSTALL``: an install prefix (``ci/install PREFIX``);
   ``PREFIX/lib/libscr.so``, then ``PREFIX/lib64/libscr.so``.
3. ``pkg-config --variable=libdir scr``: the ``scr.pc`` the install wrote,
   found through ``PKG_CONFIG_PATH``.
4. ``ctypes.util.find_library("scr")``: the system's library search
   (ldconfig cache, ``LD_LIBRARY_PATH``).

When nothing loads, :class:`scr.errors.LibraryNotFoundError` lists every
place tried and why each failed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import subprocess
from typing import Callable, List, Mapping, Optional, Tuple

from .errors import LibraryNotFoundError

#: The file name of the shared library.
LIBRARY_FILE = "libscr.so"

Tried = List[Tuple[str, str]]


def _open(path: str) -> ctypes.CDLL:
    # RTLD_GLOBAL: libscr.so brings libmpi with it; mpi4py must see the same
    # one, so that a single MPI_Init serves both.
    return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)


def _try_load(where: str, path: str, tried: Tried, must_exist: bool = True) -> Optional[ctypes.CDLL]:
    """Load ``path``; on failure add (where, why) to ``tried``."""
    if must_exist and not os.path.isfile(path):
        why = "is a directory, not a library file" if os.path.isdir(path) else "no such file"
        tried.append((f"{where} -> {path}", why))
        return None
    try:
        lib = _open(path)
    except OSError as e:
        tried.append((f"{where} -> {path}", f"cannot be loaded: {e}"))
        return None
    try:
        lib.SCR_Init  # noqa: B018 - the lookup is the check
    except AttributeError:
        tried.append((f"{where} -> {path}", "loads, but has no SCR_Init symbol: not an SCR library"))
        return None
    return lib


def pkg_config_libdir(env: Mapping[str, str], tried: Tried) -> Optional[str]:
    """``libdir`` of ``scr.pc``, or None (with the reason added to ``tried``)."""
    exe = shutil.which("pkg-config", path=env.get("PATH"))
    if exe is None:
        tried.append(("pkg-config scr", "pkg-config is not installed"))
        return None
    try:
        out = subprocess.run(
            [exe, "--variable=libdir", "scr"],
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        tried.append(("pkg-config scr", f"could not run pkg-config: {e}"))
        return None
    libdir = out.stdout.strip()
    if out.returncode != 0 or not libdir:
        where = env.get("PKG_CONFIG_PATH", "")
        tried.append(
            ("pkg-config scr", f"no scr.pc found (PKG_CONFIG_PATH={where!r})")
        )
        return None
    return libdir


def load(
    env: Optional[Mapping[str, str]] = None,
    find_library: Callable[[str], Optional[str]] = ctypes.util.find_library,
) -> Tuple[ctypes.CDLL, str]:
    """Load libscr.so; returns the library and where it came from.

    Raises :class:`LibraryNotFoundError` naming every place tried.
    """
    if env is None:
        env = os.environ
    tried: Tried = []

    explicit = env.get("SCR_LIBRARY", "")
    if explicit:
        lib = _try_load("SCR_LIBRARY", explicit, tried)
        if lib is None:
            raise LibraryNotFoundError(tried)
        return lib, explicit
    tried.append(("SCR_LIBRARY", "not set"))

    prefix = env.get("SCR_PREFIX_INSTALL", "")
    if prefix:
        for sub in ("lib", "lib64"):
            path = os.path.join(prefix, sub, LIBRARY_FILE)
            lib = _try_load("SCR_PREFIX_INSTALL", path, tried)
            if lib is not None:
                return lib, path
    else:
        tried.append(("SCR_PREFIX_INSTALL", "not set"))

    libdir = pkg_config_libdir(env, tried)
    if libdir is not None:
        path = os.path.join(libdir, LIBRARY_FILE)
        lib = _try_load("pkg-config scr", path, tried)
        if lib is not None:
            return lib, path

    name = find_library("scr")
    if name is None:
        tried.append(('ctypes.util.find_library("scr")', "found nothing (ldconfig cache, LD_LIBRARY_PATH)"))
    else:
        lib = _try_load('ctypes.util.find_library("scr")', name, tried, must_exist=False)
        if lib is not None:
            return lib, name
    raise LibraryNotFoundError(tried)
