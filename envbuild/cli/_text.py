"""Plain terminal text for the commands that must start fast (``check``): no rendering library.

A two-column summary and one line per finding, wrapped to the terminal's width with a hanging indent,
and coloured only where colour is wanted: on a terminal, unless ``NO_COLOR`` is set or ``TERM=dumb``;
``FORCE_COLOR`` forces it (https://no-color.org, https://force-color.org).  Text that is not a
terminal is 80 columns wide unless ``COLUMNS`` says otherwise, as the other commands' tables are.
"""

from __future__ import annotations

import os
from typing import TextIO

CODES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}
DEFAULT_WIDTH = 80


class Text:
    """Styling and wrapping for one output stream."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.color = wants_color(stream)
        self.width = columns(stream)

    def style(self, text: str, *names: str) -> str:
        """``text`` in the styles ``names`` ("bold", "red", ...), when colour is on."""
        if not self.color or not names:
            return text
        codes = ";".join(CODES[name] for name in names)
        return f"\x1b[{codes}m{text}\x1b[0m"

    def wrap(self, text: str, indent: int = 0) -> list[str]:
        """``text`` (control characters shown escaped) in lines of at most :attr:`width` columns, the
        ones after the first indented by ``indent`` (the first is printed after something that wide)."""
        room = max(20, self.width - indent)
        shown = printable(text)
        if len(shown) <= room and shown == shown.strip() and shown.isprintable():
            return [shown]  # one line as it is (what textwrap would return), without importing it
        import textwrap

        lines = textwrap.wrap(shown, width=room, break_on_hyphens=False) or [""]
        return [lines[0], *(" " * indent + line for line in lines[1:])]

    def grid(self, rows: list[tuple[str, str]], gap: int = 2) -> list[str]:
        """Keys (bold) in one column, values wrapped beside them."""
        key_width = max((len(key) for key, _ in rows), default=0)
        out = []
        for key, value in rows:
            head = self.style(key.ljust(key_width), "bold") + " " * gap
            first, *rest = self.wrap(value, indent=key_width + gap)
            out.append(head + first)
            out.extend(rest)
        return out

    def print(self, line: str = "") -> None:
        self.stream.write(line + "\n")


def printable(text: str) -> str:
    """Control characters (an escape sequence from a file name, say) written as ``\\x1b`` escapes."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch == " " else repr(ch)[1:-1] for ch in text)


def wants_color(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    if os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def columns(stream: TextIO) -> int:
    value = os.environ.get("COLUMNS", "")
    if value.isdigit() and int(value) > 0:
        return int(value)
    isatty = getattr(stream, "isatty", None)
    if isatty and isatty():
        try:
            return os.get_terminal_size(stream.fileno()).columns or DEFAULT_WIDTH
        except (AttributeError, ValueError, OSError):
            return DEFAULT_WIDTH
    return DEFAULT_WIDTH
