"""Context managers over the output and restart phases.

    with scr.checkpoint("ckpt.4") as ckpt:
        with open(ckpt.route("rank_0.dat"), "wb") as f:
            f.write(data)
    ckpt.all_valid   # True when every rank completed its part

Leaving the body normally completes the phase with ``valid=True`` (unless
:meth:`mark_invalid` was called); leaving it by an exception completes it
with ``valid=False`` and lets the exception go on. Completion is collective:
every rank reaches it whether or not its own body raised, so one rank's error
never leaves the others waiting in ``SCR_Complete_output``. Whether every
rank succeeded is in ``all_valid`` afterwards, on every rank.
"""

from __future__ import annotations

import os
from types import TracebackType
from typing import Optional, Type, Union

from . import _api
from .errors import SCRError


class _Phase:
    _kind = ""

    def __init__(self) -> None:
        self.name: Optional[str] = None
        #: After the block: whether every rank completed the phase validly.
        self.all_valid: Optional[bool] = None
        self._valid = True
        self._open = False

    def route(self, name: Union[str, "os.PathLike[str]"]) -> str:
        """The path for file ``name`` in this phase (:func:`scr.route_file`)."""
        if not self._open:
            raise SCRError(
                "SCR_Route_file", None, (os.fspath(name),), f"the {self._kind} phase is not open"
            )
        return _api.route_file(name)

    def mark_invalid(self) -> None:
        """Complete the phase with ``valid=False`` on this rank (for a failure
        the body handles without raising)."""
        self._valid = False

    def _complete(self, valid: bool) -> bool:
        raise NotImplementedError

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool:
        self._open = False
        valid = self._valid and exc_type is None
        try:
            self.all_valid = self._complete(valid)
        except SCRError:
            if exc_type is None:
                raise
            # The body's exception is the one to report; the failed
            # completion is chained to it by Python's context.
        return False


class Output(_Phase):
    """An output phase: ``SCR_Start_output`` on entry, ``SCR_Complete_output`` on exit."""

    _kind = "output"

    def __init__(self, name: Optional[str], flags: int) -> None:
        super().__init__()
        self.name = name
        self.flags = flags

    def __enter__(self) -> "Output":
        _api.start_output(self.name, self.flags)
        self._open = True
        return self

    def _complete(self, valid: bool) -> bool:
        return _api.complete_output(valid)


class Restart(_Phase):
    """A restart phase: ``SCR_Start_restart`` on entry (``name`` is the
    checkpoint's), ``SCR_Complete_restart`` on exit."""

    _kind = "restart"

    def __enter__(self) -> "Restart":
        self.name = _api.start_restart()
        self._open = True
        return self

    def _complete(self, valid: bool) -> bool:
        return _api.complete_restart(valid)


def checkpoint(name: Optional[str] = None, flags: int = _api.FLAG_CHECKPOINT) -> Output:
    """An output phase for checkpoint ``name`` (``FLAG_CHECKPOINT``; add
    ``FLAG_OUTPUT`` for a checkpoint that must also reach the prefix)."""
    return Output(name, flags)


def output(name: Optional[str] = None, flags: int = _api.FLAG_OUTPUT) -> Output:
    """An output phase for a dataset that is output only (``FLAG_OUTPUT``)."""
    return Output(name, flags)


def restart() -> Restart:
    """The restart phase of the checkpoint :func:`scr.have_restart` names."""
    return Restart()
