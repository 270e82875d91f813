"""Regular expressions compiled when first used, not when their module is imported.

CPython compiles a pattern at ``re.compile``: 0.05-1 ms each on a small machine, and a cold
``envbuild check`` imports modules holding ~80 module-level patterns, most of which its path never
uses (the catalog's row checks run only on a cache miss).  :func:`compile` returns a stand-in with the
compiled pattern's methods (``match``, ``fullmatch``, ``search``, ``sub``, ...) that compiles on the
first call.  Pass the stand-in's methods, not the stand-in, to code expecting an ``re.Pattern``.
"""

from __future__ import annotations

import re
from typing import Any, cast


class _Lazy:
    __slots__ = ("_args", "_compiled")

    def __init__(self, pattern: str, flags: int) -> None:
        self._args = (pattern, flags)
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:
        if self._compiled is None:
            self._compiled = re.compile(*self._args)
        return getattr(self._compiled, name)

    def __repr__(self) -> str:
        return f"lazyre.compile({self._args[0]!r}, {self._args[1]})"


def compile(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile(pattern, flags)``, done on first use."""
    return cast("re.Pattern[str]", _Lazy(pattern, flags))
