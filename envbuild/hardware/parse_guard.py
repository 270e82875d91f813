"""Every capture reader fails the same way: a :class:`CaptureError` naming the file and the tool.

A capture is text from a machine envbuild does not control.  A reader that meets a structure it did not
expect (a number where an object was, a list nested a hundred thousand deep) must say the capture is
unreadable (``check --smi``: exit 2), never end in a traceback.  :func:`capture_parser` wraps each
tool's ``parse_*`` function, so ``check --smi`` (:mod:`.captures`) and the validator's live reading
(:mod:`.live`) get it alike.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from envbuild.errors import CaptureError
from envbuild.models.hardware import HardwareFacts

Parser = Callable[[str, "str | None"], HardwareFacts]
# What a reader walking an unexpected structure raises (RecursionError: json.loads on deep nesting).
PARSER_ERRORS: tuple[type[Exception], ...] = (
    ValueError,
    TypeError,
    KeyError,
    AttributeError,
    IndexError,
    OverflowError,
    RecursionError,
)


def unreadable(path: str | None, tool: str, exc: BaseException) -> CaptureError:
    """The capture error for ``exc`` raised while reading ``path`` as ``tool`` output."""
    name = path or "<input>"
    if isinstance(exc, RecursionError):
        return CaptureError(
            f"{name}: `{tool}` capture nested too deeply to read (a real one nests a few levels)"
        )
    return CaptureError(f"{name}: unreadable `{tool}` capture ({type(exc).__name__}: {exc})")


def capture_parser(tool: str) -> Callable[[Parser], Parser]:
    """Decorate a ``parse_*(text, path)`` function: any :data:`PARSER_ERRORS` becomes a CaptureError."""

    def wrap(parse: Parser) -> Parser:
        @functools.wraps(parse)
        def guarded(text: str, path: str | None = None) -> HardwareFacts:
            try:
                return parse(text, path)
            except CaptureError:
                raise
            except PARSER_ERRORS as exc:
                raise unreadable(path, tool, exc) from None

        return guarded

    return wrap
