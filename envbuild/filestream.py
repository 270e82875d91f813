"""Files read in chunks: hashed, scanned for secrets and copied without ever being held whole in memory.

An app folder can hold model weights and data sets of many gigabytes; render and the build-context
check read each file in :data:`CHUNK` pieces.

**The secret scan** (:class:`SecretScan`) applies the one policy of :mod:`envbuild.secrets` to a file
whose bytes arrive in blocks.  A file of at most :data:`CHUNK` bytes is judged whole, by
:func:`envbuild.secrets.file_reason`, exactly as if it had been read at once.  A larger one is judged
in windows: each window ends at a line break (a token format never spans lines; a single line longer
than :data:`CHUNK` is cut where it is), and starts with the last :data:`OVERLAP` bytes of the window
before it.  The overlap is far longer than any token format or PEM ``BEGIN`` line the policy knows (the
longest, a fine-grained GitHub token, is under 100 characters), so a secret that straddles two windows
is whole in the second; two clues of one secret (a service-account key's ``"private_key"`` and
``"client_email"``) are found together when they lie within :data:`OVERLAP` of each other.

**The copy** (:class:`FileCopy`): render records a file's path, size and sha256 when it scans it, and
copies it at write time with :func:`write_content`, hashing again as it copies: a file that changed in
between (so that the bytes copied are not the bytes scanned) is refused, and nothing half-copied stays.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from envbuild.errors import BundleError
from envbuild.secrets import file_reason

CHUNK = 1 << 20
OVERLAP = 64 << 10


@dataclass(frozen=True)
class FileCopy:
    """A bundle file copied from ``path`` at write time; ``size`` and ``sha256`` as render read it."""

    path: Path
    size: int
    sha256: str


Content = bytes | FileCopy  # what a bundle file holds: rendered bytes, or a copy of a source file


def content_sha256(data: Content) -> str:
    return data.sha256 if isinstance(data, FileCopy) else hashlib.sha256(data).hexdigest()


def content_size(data: Content) -> int:
    return data.size if isinstance(data, FileCopy) else len(data)


def feed(digest: Any, data: Content) -> None:
    """Add the bytes of ``data`` to the hashlib object ``digest``: a copy is read again, in chunks."""
    if not isinstance(data, FileCopy):
        digest.update(data)
        return
    with data.path.open("rb") as handle:
        _each_chunk(handle, digest.update)


def write_content(path: Path, data: Content) -> None:
    """Write ``data`` to ``path``; a :class:`FileCopy` is streamed and must still have its sha256."""
    if not isinstance(data, FileCopy):
        path.write_bytes(data)
        return
    digest = hashlib.sha256()
    with data.path.open("rb") as source, path.open("wb") as target:

        def copy(chunk: bytes) -> None:
            digest.update(chunk)
            target.write(chunk)

        _each_chunk(source, copy)
    if digest.hexdigest() != data.sha256:
        path.unlink()
        raise BundleError(
            f"{data.path}: changed while render was copying it (the bytes differ from those it checked); "
            "render again once nothing writes to the app folder"
        )


def _each_chunk(handle: BinaryIO, use: Callable[[bytes], None]) -> None:
    for chunk in iter(lambda: handle.read(CHUNK), b""):
        use(chunk)


class SecretScan:
    """The secret policy over a file given block by block: :meth:`feed` each block, then :meth:`close`.

    ``reason`` is set (and the rest of the file ignored) once a window holds a secret."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.reason: str | None = None
        self._pending = b""  # read, not yet scanned
        self._context = b""  # the end of the last window scanned: the start of the next
        self._first = True

    def feed(self, block: bytes) -> None:
        if self.reason is not None:
            return
        self._pending += block
        while len(self._pending) > CHUNK and self.reason is None:
            cut = self._pending.rfind(b"\n", 0, CHUNK) + 1 or CHUNK
            self._scan(self._pending[:cut])
            self._pending = self._pending[cut:]

    def close(self) -> str | None:
        if self.reason is None and (self._pending or self._first):
            self._scan(self._pending)
        self._pending = self._context = b""
        return self.reason

    def _scan(self, part: bytes) -> None:
        window = self._context + part
        # a later window starts mid-file: a line break in front keeps checks meant for a file's first
        # bytes (a DER key's header) from reading its start as the file's
        self.reason = file_reason(self.name, window if self._first else b"\n" + window)
        self._first = False
        self._context = window[-OVERLAP:]


def scan_file(path: Path, name: str | None = None) -> str | None:
    """Why the file at ``path`` must not go into a bundle or an image (by name and content), or None."""
    scan = SecretScan(name or path.name)
    with path.open("rb") as handle:
        _each_chunk(handle, scan.feed)
    return scan.close()


def hash_and_scan(path: Path, name: str, *, scan: bool) -> tuple[FileCopy, str | None]:
    """One pass over ``path``: its :class:`FileCopy` and, when ``scan``, the secret it holds (else None)."""
    digest = hashlib.sha256()
    scanner = SecretScan(name) if scan else None
    size = 0

    def use(chunk: bytes) -> None:
        nonlocal size
        size += len(chunk)
        digest.update(chunk)
        if scanner is not None:
            scanner.feed(chunk)

    with path.open("rb") as handle:
        _each_chunk(handle, use)
    reason = scanner.close() if scanner is not None else None
    return FileCopy(path=path, size=size, sha256=digest.hexdigest()), reason
