"""The scr.h functions, one Python function each, over ctypes.

Failures raise :class:`scr.errors.SCRError` (naming the C call, its
arguments and its return code) instead of returning codes; the two
completion calls return whether every rank succeeded, as in scr.h and in
LLNL's bindings. Every call except :func:`route_file`, :func:`config` and
:func:`version` is collective over ``MPI_COMM_WORLD``.
"""

from __future__ import annotations

import atexit
import ctypes
import enum
import os
import sys
from typing import Dict, Iterable, Optional, Union

from . import _library
from .errors import SCRError

#: ``SCR_MAX_FILENAME``: names and returned paths are shorter than this, NUL included.
MAX_FILENAME = 1024
#: ``SCR_SUCCESS``.
SUCCESS = 0


class Flag(enum.IntFlag):
    """Dataset properties for :func:`start_output` (``SCR_FLAG_*``)."""

    NONE = 0
    CHECKPOINT = 1 << 0
    OUTPUT = 1 << 1


FLAG_NONE = Flag.NONE
FLAG_CHECKPOINT = Flag.CHECKPOINT
FLAG_OUTPUT = Flag.OUTPUT

_lib, LIBRARY_PATH = _library.load()
# free() for SCR_Config's malloc'd answers: the process's C library.
_libc = ctypes.CDLL(None)
_libc.free.argtypes = [ctypes.c_void_p]
_libc.free.restype = None

_int = ctypes.c_int
_str = ctypes.c_char_p
_pint = ctypes.POINTER(ctypes.c_int)
for _name, _args, _res in [
    ("SCR_Init", [], _int),
    ("SCR_Finalize", [], _int),
    ("SCR_Config", [_str], ctypes.c_void_p),
    ("SCR_Route_file", [_str, ctypes.c_char_p], _int),
    ("SCR_Have_restart", [_pint, ctypes.c_char_p], _int),
    ("SCR_Start_restart", [ctypes.c_char_p], _int),
    ("SCR_Complete_restart", [_int], _int),
    ("SCR_Need_checkpoint", [_pint], _int),
    ("SCR_Start_output", [_str, _int], _int),
    ("SCR_Complete_output", [_int], _int),
    ("SCR_Should_exit", [_pint], _int),
    ("SCR_Current", [_str], _int),
    ("SCR_Delete", [_str], _int),
    ("SCR_Drop", [_str], _int),
    ("SCR_Get_version", [], ctypes.c_char_p),
]:
    _fn = getattr(_lib, _name)
    _fn.argtypes = _args
    _fn.restype = _res


class _State:
    """What the Python side knows: for error messages and completion results."""

    initialized = False
    phase: Optional[str] = None  # "output" or "restart" while one is open
    atexit_registered = False


def _encode(value: Union[str, "os.PathLike[str]"], what: str) -> bytes:
    """A name or path argument as the C library takes it."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    if "\0" in value:
        raise ValueError(f"{what} {value!r} contains a NUL character")
    return value.encode("utf-8")


def _fail(call: str, rc: int, arguments: Iterable[object] = (), reason: Optional[str] = None) -> SCRError:
    if reason is None and not _State.initialized and call not in ("SCR_Init", "SCR_Config"):
        reason = "SCR is not initialized (call scr.init() first)"
    return SCRError(call, rc, tuple(arguments), reason)


def _check(call: str, rc: int, *arguments: object) -> None:
    if rc != SUCCESS:
        raise _fail(call, rc, arguments)


def config(conf: str) -> Optional[str]:
    """``SCR_Config``: ``"KEY=VALUE"`` sets, ``"KEY="`` unsets (both return
    None; only before :func:`init`), ``"KEY"`` queries: the value, or None
    when the parameter has none.

    scr.h returns NULL both for "no value" and for a refused string, so a
    refused setting (unknown parameter, bad value, a setting after init) is
    not an exception here: the library prints why on stderr."""
    text = _encode(conf, "config")
    ptr = _lib.SCR_Config(text)
    if ptr is None:
        return None
    try:
        raw = ctypes.string_at(ptr)
    finally:
        _libc.free(ptr)
    return raw.decode("utf-8", errors="surrogateescape")


def _apply_params(params: Union[None, str, Iterable[str], Dict[str, object]]) -> None:
    if params is None:
        return
    if isinstance(params, str):
        config(params)
    elif isinstance(params, dict):
        for key, value in params.items():
            config(f"{key}=" if value is None else f"{key}={value}")
    else:
        for item in params:
            config(str(item))


def _mpi_ready() -> None:
    """Initialise MPI through mpi4py, so that SCR_Init (which duplicates
    MPI_COMM_WORLD and never calls MPI_Init itself) and the application
    share one MPI_Init."""
    try:
        from mpi4py import MPI  # noqa: PLC0415 - MPI starts here, not at import
    except ImportError as e:
        raise ImportError(
            "scr.init() initialises MPI through mpi4py, which cannot be imported "
            f"({e}); install it with `pip install mpi4py`"
        ) from e
    if MPI.Is_finalized():
        raise SCRError("SCR_Init", None, (), "MPI is already finalized")
    if not MPI.Is_initialized():
        MPI.Init()


def _warn_unfinalized() -> None:
    if _State.initialized:
        print(
            "scr: warning: scr.init() was called but scr.finalize() was not; "
            "SCR did not finish (no final flush). Call scr.finalize() before exiting.",
            file=sys.stderr,
        )


def init(params: Union[None, str, Iterable[str], Dict[str, object]] = None) -> None:
    """``SCR_Init``, after starting MPI through mpi4py. Collective.

    ``params`` are :func:`config` settings applied first: a ``"KEY=VALUE"``
    string, a list of them, or a dict (a None value unsets the key)."""
    _apply_params(params)
    _mpi_ready()
    rc = _lib.SCR_Init()
    if rc != SUCCESS:
        reason = "SCR is already initialized" if _State.initialized else None
        raise SCRError("SCR_Init", rc, (), reason)
    _State.initialized = True
    _State.phase = None
    if not _State.atexit_registered:
        # mpi4py finalises MPI after Python's atexit handlers have run.
        atexit.register(_warn_unfinalized)
        _State.atexit_registered = True


def finalize() -> None:
    """``SCR_Finalize``: flushes what the policy says and shuts SCR down;
    call it before MPI is finalised. Collective."""
    rc = _lib.SCR_Finalize()
    was = _State.initialized
    _State.initialized = False
    _State.phase = None
    if rc != SUCCESS:
        raise SCRError("SCR_Finalize", rc, (), None if was else "SCR is not initialized")


def route_file(name: Union[str, "os.PathLike[str]"]) -> str:
    """``SCR_Route_file``: within an output phase the path to write ``name``
    at (registering it in the dataset); within a restart phase the path to
    read it from; outside a phase, ``name`` itself. Local to the rank."""
    buf = ctypes.create_string_buffer(MAX_FILENAME)
    rc = _lib.SCR_Route_file(_encode(name, "name"), buf)
    _check("SCR_Route_file", rc, os.fspath(name))
    return os.fsdecode(buf.value)


def have_restart() -> Optional[str]:
    """``SCR_Have_restart``: the name of the checkpoint to restart from, or None."""
    flag = ctypes.c_int(0)
    buf = ctypes.create_string_buffer(MAX_FILENAME)
    _check("SCR_Have_restart", _lib.SCR_Have_restart(ctypes.byref(flag), buf))
    return buf.value.decode("utf-8") if flag.value else None


def start_restart() -> str:
    """``SCR_Start_restart``: open the restart phase; the checkpoint's name."""
    buf = ctypes.create_string_buffer(MAX_FILENAME)
    _check("SCR_Start_restart", _lib.SCR_Start_restart(buf))
    _State.phase = "restart"
    return buf.value.decode("utf-8")


def _complete(call: str, fn: "ctypes._CFuncPtr", phase: str, valid: bool) -> bool:
    was = _State.phase
    rc = fn(1 if valid else 0)
    if rc == SUCCESS:
        _State.phase = None
        return True
    if was != phase:
        starter = "start_output" if phase == "output" else "start_restart"
        reason = None if not _State.initialized else f"no {phase} phase is open (call scr.{starter}() first)"
        raise _fail(call, rc, (bool(valid),), reason)
    _State.phase = None
    return False


def complete_restart(valid: bool = True) -> bool:
    """``SCR_Complete_restart``: close the restart phase, saying whether this
    rank read its files. True when every rank did; otherwise the next older
    checkpoint (if any) is what :func:`have_restart` reports next."""
    return _complete("SCR_Complete_restart", _lib.SCR_Complete_restart, "restart", valid)


def need_checkpoint() -> bool:
    """``SCR_Need_checkpoint``: whether to checkpoint now (SCR_CHECKPOINT_INTERVAL,
    _SECONDS, _OVERHEAD; no policy set answers False)."""
    flag = ctypes.c_int(0)
    _check("SCR_Need_checkpoint", _lib.SCR_Need_checkpoint(ctypes.byref(flag)))
    return bool(flag.value)


def start_output(name: Optional[str], flags: int) -> None:
    """``SCR_Start_output``: open an output phase for dataset ``name`` (None:
    a default name) with ``flags`` (FLAG_CHECKPOINT, FLAG_OUTPUT, or both)."""
    cname = None if name is None else _encode(name, "name")
    if not isinstance(flags, int):
        raise TypeError(f"flags must be an int (scr.FLAG_*), not {type(flags).__name__}")
    _check("SCR_Start_output", _lib.SCR_Start_output(cname, int(flags)), name, Flag(flags))
    _State.phase = "output"


def complete_output(valid: bool = True) -> bool:
    """``SCR_Complete_output``: close the output phase, saying whether this
    rank wrote its files. True when every rank did."""
    return _complete("SCR_Complete_output", _lib.SCR_Complete_output, "output", valid)


def should_exit() -> bool:
    """``SCR_Should_exit``: whether the application should stop now (halt
    file, time limit)."""
    flag = ctypes.c_int(0)
    _check("SCR_Should_exit", _lib.SCR_Should_exit(ctypes.byref(flag)))
    return bool(flag.value)


def current(name: str) -> None:
    """``SCR_Current``: make checkpoint ``name`` the one the job restarted from
    (for applications that read it without the restart API)."""
    _check("SCR_Current", _lib.SCR_Current(_encode(name, "name")), name)


def delete(name: str) -> None:
    """``SCR_Delete``: delete dataset ``name`` from the cache, the prefix and the index."""
    _check("SCR_Delete", _lib.SCR_Delete(_encode(name, "name")), name)


def drop(name: str) -> None:
    """``SCR_Drop``: forget dataset ``name`` in the index; its files stay."""
    _check("SCR_Drop", _lib.SCR_Drop(_encode(name, "name")), name)


def version() -> str:
    """``SCR_Get_version``: the library's version string."""
    raw = _lib.SCR_Get_version()
    if raw is None:
        raise SCRError("SCR_Get_version", None, (), "the library returned NULL")
    return raw.decode("utf-8")


def is_initialized() -> bool:
    """Whether :func:`init` succeeded and :func:`finalize` has not run since."""
    return _State.initialized
