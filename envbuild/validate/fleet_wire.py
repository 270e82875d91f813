"""The lines of ``validate --fleet``'s handshake: bounded JSON objects, read against a deadline for the
whole exchange, and the one place where a peer's text enters envbuild.

- :class:`Lines` reads one JSON object per line, at most :data:`MAX_LINE` bytes, with each ``recv`` given
  only the time left before the caller's deadline: a peer that sends one byte every few seconds is cut
  at the deadline, not reset by each byte.
- Anything a peer's bytes can raise (bad UTF-8, JSON nested past the recursion limit, a number too long
  to convert, ...) becomes :class:`WireError`: the caller refuses that peer and carries on.
- :func:`peer_text` is where a peer's words (a ``refused`` or ``abort`` reason, an unexpected message)
  become text for an error message, a terminal or report.md; no other path carries them.
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any

from envbuild.untrusted import terminal

MAX_LINE = 4096
PEER_TEXT_MAX = 300


class WireError(Exception):
    """A peer sent something that is not one of our messages, closed the connection, or took too long."""


def send(conn: socket.socket, data: dict[str, object], deadline: float) -> None:
    conn.settimeout(max(0.05, deadline - time.monotonic()))
    try:
        conn.sendall(json.dumps(data).encode() + b"\n")
    except OSError as exc:
        raise WireError(f"cannot send: {exc.strerror or exc}") from None


def parse(line: bytes) -> dict[str, Any]:
    """One message; every error a peer's bytes can raise is a :class:`WireError`."""
    try:
        data = json.loads(line.decode("utf-8"))
    except (ValueError, RecursionError, MemoryError) as exc:  # UnicodeDecodeError is a ValueError
        raise WireError(f"not a JSON line ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise WireError("not a JSON object")
    return data


class Lines:
    """The JSON lines arriving on ``conn`` (two messages sent back to back arrive in one segment; the
    second stays here for the next :meth:`read`)."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.buffer = b""

    def read(self, deadline: float) -> dict[str, Any]:
        """The next message, or :class:`WireError` once ``deadline`` (time.monotonic()) has passed."""
        while b"\n" not in self.buffer:
            if len(self.buffer) > MAX_LINE:
                raise WireError("an over-long message")
            left = deadline - time.monotonic()
            if left <= 0:
                raise WireError("no complete message in time")
            self.conn.settimeout(left)
            try:
                chunk = self.conn.recv(MAX_LINE + 1)
            except TimeoutError:
                raise WireError("no complete message in time") from None
            except OSError as exc:
                raise WireError(f"the connection failed: {exc.strerror or exc}") from None
            if not chunk:
                raise WireError("the connection closed")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        if len(line) > MAX_LINE:
            raise WireError("an over-long message")
        return parse(line)


def alive(conn: socket.socket) -> bool:
    """An admitted lot's connection is still open and quiet (a lot sends nothing while it waits for the
    start: data there, or the end of the stream, means it is gone or misbehaving)."""
    try:
        conn.setblocking(False)
        try:
            conn.recv(1, socket.MSG_PEEK)
        finally:
            conn.setblocking(True)
    except BlockingIOError:
        return True
    except OSError:
        return False
    return False


def peer_text(value: object) -> str:
    """A peer's words, as envbuild shows them: control characters and line breaks (ESC, CR, ...) made
    visible as escapes (``\\x1b``: :func:`envbuild.untrusted.terminal`), at most :data:`PEER_TEXT_MAX`
    characters.  Every text that comes from a peer of the fleet goes through here."""
    try:
        text = value if isinstance(value, str) else json.dumps(value, default=str)
    except (ValueError, RecursionError):  # a peer's JSON nested near the limit
        text = f"(a {type(value).__name__} too deep to show)"
    shown = terminal(text)
    return shown if len(shown) <= PEER_TEXT_MAX else shown[:PEER_TEXT_MAX] + "..."
