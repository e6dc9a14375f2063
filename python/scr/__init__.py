"""Scalable Checkpoint/Restart for Python MPI applications (mpi4py).

A binding of the SCR C library (scr.h, SCR 3.1 API; this project's libscr.so
built by ``ci/install PREFIX``) over ctypes, with the names of LLNL
SCR's Python bindings, plus context managers and exceptions::

    import scr
    scr.init()                      # starts MPI through mpi4py, then SCR_Init
    if scr.have_restart():
        with scr.restart() as r:
            state = read(r.route("state.dat"))
    with scr.checkpoint("ckpt.1") as ckpt:
        write(ckpt.route("state.dat"))
    scr.finalize()

Importing the module loads libscr.so (see :mod:`scr._library` for where it
looks: ``SCR_LIBRARY``, ``SCR_PREFIX_INSTALL``, pkg-config, the system) and
raises :class:`LibraryNotFoundError`, an ImportError naming every place
tried, when none has it. Failed calls raise :class:`SCRError`.
"""

from ._api import (
    FLAG_CHECKPOINT,
    FLAG_NONE,
    FLAG_OUTPUT,
    LIBRARY_PATH,
    MAX_FILENAME,
    Flag,
    complete_output,
    complete_restart,
    config,
    current,
    delete,
    drop,
    finalize,
    have_restart,
    init,
    is_initialized,
    need_checkpoint,
    route_file,
    should_exit,
    start_output,
    start_restart,
    version,
)
from ._phases import Output, Restart, checkpoint, output, restart
from .errors import LibraryNotFoundError, SCRError

__version__ = "0.1.0"

__all__ = [
    "FLAG_CHECKPOINT",
    "FLAG_NONE",
    "FLAG_OUTPUT",
    "LIBRARY_PATH",
    "MAX_FILENAME",
    "Flag",
    "LibraryNotFoundError",
    "Output",
    "Restart",
    "SCRError",
    "checkpoint",
    "complete_output",
    "complete_restart",
    "config",
    "current",
    "delete",
    "drop",
    "finalize",
    "have_restart",
    "init",
    "is_initialized",
    "need_checkpoint",
    "output",
    "restart",
    "route_file",
    "should_exit",
    "start_output",
    "start_restart",
    "version",
]
