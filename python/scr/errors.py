"""The exceptions of the ``scr`` module."""

from __future__ import annotations

from typing import Optional, Sequence, Tuple


class SCRError(RuntimeError):
    """An SCR call failed.

    ``call`` is the C function (``"SCR_Route_file"``), ``arguments`` the
    arguments it was given, ``code`` the return code it gave (``None`` when
    the call never reached the library) and ``reason`` a sentence saying why,
    when the Python side knows it. The library itself prints its typed error,
    with the rank, on stderr; this exception names the call that failed.

    It derives from ``RuntimeError``, which LLNL's bindings raise, so code
    written against them catches it unchanged.
    """

    def __init__(
        self,
        call: str,
        code: Optional[int],
        arguments: Sequence[object] = (),
        reason: Optional[str] = None,
    ) -> None:
        self.call = call
        self.code = code
        self.arguments: Tuple[object, ...] = tuple(arguments)
        self.reason = reason
        shown = ", ".join(repr(a) for a in self.arguments)
        text = f"{call}({shown}) failed"
        if code is not None:
            text += f" with return code {code}"
        if reason:
            text += f": {reason}"
        elif code is not None:
            text += " (the library printed the reason on stderr)"
        super().__init__(text)


class LibraryNotFoundError(ImportError):
    """libscr.so could not be found or loaded.

    ``tried`` lists each place searched with why it did not do, in order.
    """

    def __init__(self, tried: Sequence[Tuple[str, str]]) -> None:
        self.tried: Tuple[Tuple[str, str], ...] = tuple(tried)
        lines = [
            "cannot load the SCR C library (libscr.so); tried, in order:",
        ]
        lines += [f"  {where}: {why}" for where, why in self.tried]
        lines.append(
            "Install it with `ci/install PREFIX` from the SCR repository and set "
            "SCR_LIBRARY=PREFIX/lib/libscr.so (or SCR_PREFIX_INSTALL=PREFIX, or add "
            "PREFIX/lib/pkgconfig to PKG_CONFIG_PATH)."
        )
        super().__init__("\n".join(lines))
