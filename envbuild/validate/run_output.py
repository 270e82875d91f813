"""A run's output (:mod:`envbuild.validate.runner`): bounded buffers, the marker line, and the pipes.

:class:`StreamBuffer` keeps the first :data:`HEAD_BYTES` and the last ``tail_bytes`` of a stream;
:class:`MarkerScanner` keeps the last line that starts with the marker whole (up to
:data:`MARKER_LINE_MAX` bytes); ``Pipes`` moves stdin, stdout and stderr on one selector.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import subprocess
from typing import IO

TAIL_BYTES = 64 * 1024
HEAD_BYTES = 4096
MARKER_LINE_MAX = 8 * 1024 * 1024
READ_CHUNK = 64 * 1024
# A cut stream's tail loses its first word, up to the first whitespace within this many bytes (or that
# many bytes): longer than any token format the secret policy knows, so a token cut in half goes whole.
FIRST_WORD_MAX = 512
_FIRST_WORD = re.compile(rb"\S{0,%d}\s?" % FIRST_WORD_MAX)


# ----------------------------------------------------------------------------------------------------
# bounded output


class StreamBuffer:
    """The first ``head_max`` and the last ``tail_max`` bytes of a stream, and how many were dropped."""

    def __init__(self, tail_max: int = TAIL_BYTES, head_max: int = HEAD_BYTES) -> None:
        self.tail_max = tail_max
        self.head_max = head_max
        self.head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        if len(self.head) < self.head_max:
            self.head += data[: self.head_max - len(self.head)]
        if len(data) >= self.tail_max:
            self._tail = bytearray(data[-self.tail_max :])
            return
        self._tail += data
        excess = len(self._tail) - self.tail_max
        if excess > 0:
            del self._tail[:excess]

    @property
    def tail(self) -> bytes:
        """The last bytes of the stream.  When the stream was cut, its first word (up to the first
        whitespace, at most :data:`FIRST_WORD_MAX` bytes) goes too: it may be the end of a token whose
        start was cut away, which no redaction could recognise (the start of a token format is what the
        secret policy looks for)."""
        if self.total == len(self._tail):
            return bytes(self._tail)
        cut = _FIRST_WORD.match(self._tail)
        return bytes(self._tail[cut.end() if cut else 0 :])

    @property
    def dropped(self) -> int:
        """Bytes of the stream that are not in the tail (the head, when kept, is a separate small copy)."""
        return self.total - len(self.tail)


class MarkerScanner:
    """Keeps the last line of a stream that starts with ``marker`` (without its newline).

    Lines that do not start with the marker are skipped without being held; a marker line longer than
    ``limit`` bytes is dropped and recorded in :attr:`overflow`.
    """

    def __init__(self, marker: bytes, limit: int = MARKER_LINE_MAX) -> None:
        if not marker or b"\n" in marker:
            raise ValueError("the marker must be non-empty and hold no newline")
        self.marker = marker
        self.limit = limit
        self.line: bytes | None = None
        self.overflow = False
        # The line being read when it may still be a marker line; None: skipping to the next line.
        self._candidate: bytearray | None = bytearray()  # the stream starts at a line start
        self._search = b"\n" + marker[:1]

    def feed(self, data: bytes) -> None:
        mlen = len(self.marker)
        pos, size = 0, len(data)
        while pos < size:
            cand = self._candidate
            if cand is None:  # jump to the next line that starts like the marker
                nxt = data.find(self._search, pos)
                if nxt < 0:
                    if data.endswith(b"\n"):
                        self._candidate = bytearray()
                    return
                self._candidate = bytearray()
                pos = nxt + 1
                continue
            nl = data.find(b"\n", pos)
            end = size if nl < 0 else nl
            if len(cand) < mlen:
                take = min(end, pos + mlen - len(cand))
                cand += data[pos:take]
                pos = take
                if cand != self.marker[: len(cand)]:
                    self._candidate = None  # not a marker line
                    continue
            if len(cand) >= mlen:
                cand += data[pos:end]
                if len(cand) > self.limit:
                    self._candidate, self.line, self.overflow = None, None, True
                    pos = end
                    continue
            pos = end
            if nl < 0:
                return
            if len(cand) >= mlen:
                self.line, self.overflow = bytes(cand), False
            self._candidate = bytearray()
            pos = nl + 1

    def close(self) -> None:
        """The stream ended: a marker line without a final newline counts too."""
        cand = self._candidate
        if cand is not None and len(cand) >= len(self.marker):
            self.line, self.overflow = bytes(cand), False
        self._candidate = None


class Pipes:
    """The run's pipes and its pidfd on one selector: stdin written, stdout/stderr read into buffers."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        stdin: bytes,
        out_buf: StreamBuffer,
        err_buf: StreamBuffer,
        scanner: MarkerScanner | None,
    ) -> None:
        self.proc = proc
        self.pending = memoryview(stdin)
        self.scanner = scanner
        self.sel = selectors.DefaultSelector()
        self.readers: dict[int, tuple[IO[bytes], StreamBuffer]] = {}
        self.pidfd: int | None = None
        self._bufs = (out_buf, err_buf)

    def open(self) -> None:
        proc = self.proc
        streams = [(proc.stdout, self._bufs[0]), (proc.stderr, self._bufs[1])]
        for pipe, buf in streams:
            if pipe is not None:
                os.set_blocking(pipe.fileno(), False)
                self.sel.register(pipe.fileno(), selectors.EVENT_READ, "read")
                self.readers[pipe.fileno()] = (pipe, buf)
        if proc.stdin is not None:
            if self.pending:
                os.set_blocking(proc.stdin.fileno(), False)
                self.sel.register(proc.stdin.fileno(), selectors.EVENT_WRITE, "write")
            else:
                proc.stdin.close()
        if hasattr(os, "pidfd_open"):
            try:
                self.pidfd = os.pidfd_open(proc.pid)
            except OSError:  # pragma: no cover - a kernel before 5.3: poll instead
                self.pidfd = None
            else:
                self.sel.register(self.pidfd, selectors.EVENT_READ, "exit")

    def forget_exit(self) -> None:
        if self.pidfd is not None:
            self.sel.unregister(self.pidfd)
            os.close(self.pidfd)
            self.pidfd = None

    def _close_reader(self, fd: int) -> None:
        self.sel.unregister(fd)
        pipe, _ = self.readers.pop(fd)
        pipe.close()
        if self.scanner is not None and pipe is self.proc.stdout:
            self.scanner.close()

    def pump(self, timeout: float) -> None:
        """Wait up to ``timeout`` for the pipes or the main process's exit; move what is ready."""
        for key, _ in self.sel.select(timeout):
            fd = key.fd
            if key.data == "read":
                try:
                    chunk = os.read(fd, READ_CHUNK)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    self._close_reader(fd)
                    continue
                pipe, buf = self.readers[fd]
                buf.feed(chunk)
                if self.scanner is not None and pipe is self.proc.stdout:
                    self.scanner.feed(chunk)
            elif key.data == "write":
                try:
                    written = os.write(fd, self.pending[:READ_CHUNK])
                    self.pending = self.pending[written:]
                except BlockingIOError:
                    continue
                except OSError:  # BrokenPipeError: the program does not read its stdin
                    self.pending = memoryview(b"")
                if not self.pending:
                    self.sel.unregister(fd)
                    assert self.proc.stdin is not None
                    self.proc.stdin.close()

    def close(self) -> bool:
        """Close everything; whether a pipe was still open (held by a process that would not die)."""
        cut = bool(self.readers)
        self.forget_exit()
        if self.scanner is not None and self.proc.stdout is not None and not self.proc.stdout.closed:
            self.scanner.close()
        for key in list(self.sel.get_map().values()):
            self.sel.unregister(key.fd)
        self.sel.close()
        self.readers.clear()
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None and not pipe.closed:
                with contextlib.suppress(OSError):
                    pipe.close()
        return cut
