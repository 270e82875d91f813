"""Files written whole or not at all: the one atomic write every writer of envbuild uses.

A file is written to a temporary file beside it (the same folder, so the rename stays on one file system),
named ``.NAME.<12 hex digits>.tmp``; the bytes are flushed and fsynced, then the temporary file is renamed
onto ``NAME`` (:func:`os.replace`).  On any failure on the way (an exception from the writer, a full disk
at write, fsync or close, a rename refused, ``KeyboardInterrupt``) the temporary file is removed, ``NAME``
keeps what it held, and the original error goes on.

- :func:`write_bytes` / :func:`write_text`: content already in memory;
- :func:`writing`: a context manager yielding a binary file for a streaming writer (a download, a zip);
- :func:`write_many`: several files committed together (each written and fsynced first, then renamed in
  the order given: a bundle's lock last);
- :func:`leftovers`: the temporary files of a target that a process killed mid-write left (a daemon
  thread stopped at exit never reaches its cleanup).

``mode``: ``None`` creates the file as :func:`open` would (``0o666`` less the umask); an int gives it
exactly that mode (set on the temporary file, before any byte is written).  A private file
(``mode=0o600``) is never readable by others, not even while it is written.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import BinaryIO

_SUFFIX = ".tmp"
_RANDOM = 6  # bytes of os.urandom in a temporary file's name: 12 hex digits
_TRIES = 100


def _prefix(path: Path) -> str:
    return f".{path.name}."


def leftovers(path: Path) -> list[Path]:
    """The temporary files of ``path`` in its folder: none once every write to it has ended, unless the
    process was killed mid-write."""
    prefix = _prefix(path)
    try:
        names = os.listdir(path.parent)
    except OSError:
        return []
    return sorted(
        path.parent / name
        for name in names
        if name.startswith(prefix) and name.endswith(_SUFFIX) and _is_token(name[len(prefix) : -len(_SUFFIX)])
    )


def _is_token(text: str) -> bool:
    return len(text) == 2 * _RANDOM and all(c in "0123456789abcdef" for c in text)


class _Temp:
    """A temporary file beside ``path``, open for writing: :meth:`finish` (flush, fsync, close) it, then
    rename :attr:`name` onto ``path``; or :meth:`discard` it."""

    def __init__(self, path: Path, mode: int | None) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
        for _ in range(_TRIES):
            name = str(path.parent / f"{_prefix(path)}{os.urandom(_RANDOM).hex()}{_SUFFIX}")
            try:
                fd = os.open(name, flags, 0o666 if mode is None else 0o600)
            except FileExistsError:
                continue
            break
        else:  # pragma: no cover - 100 collisions of 48 random bits
            raise FileExistsError(f"{path}: no free name for a temporary file beside it")
        self.name = name
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            self.handle: BinaryIO = os.fdopen(fd, "wb")
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(name)
            raise

    def finish(self) -> None:
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.handle.close()

    def discard(self) -> None:
        """Close and remove the temporary file, whatever state it is in; errors here are ignored (the
        error that led here is the one to report)."""
        with contextlib.suppress(OSError, ValueError):
            self.handle.close()
        with contextlib.suppress(OSError):
            os.unlink(self.name)


@contextlib.contextmanager
def writing(path: Path, *, mode: int | None = None) -> Iterator[BinaryIO]:
    """A binary file that becomes ``path`` when the ``with`` block ends without an exception.

    The file is flushed, fsynced and closed, then renamed onto ``path``; on any exception (from the block,
    or from the flush, fsync or rename) the temporary file is removed and the exception goes on."""
    temp = _Temp(path, mode)
    try:
        yield temp.handle
        temp.finish()
        os.replace(temp.name, path)
    except BaseException:
        temp.discard()
        raise


def write_bytes(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` whole or not at all."""
    with writing(path, mode=mode) as handle:
        handle.write(data)


def write_text(path: Path, text: str, *, encoding: str = "utf-8", mode: int | None = None) -> None:
    """Write ``text`` to ``path`` whole or not at all (encoded, no newline translation: as on POSIX)."""
    write_bytes(path, text.encode(encoding), mode=mode)


def write_many(files: Mapping[Path, bytes], *, mode: int | None = None) -> None:
    """Write every file of ``files`` (path -> content) to its temporary file (fsynced), then rename each
    onto its path in the order given.  A failure while writing leaves every path as it was; every
    temporary file not yet renamed is removed on any failure."""
    temps: list[tuple[_Temp, Path]] = []
    renamed = 0
    try:
        for path, data in files.items():
            temp = _Temp(path, mode)
            temps.append((temp, path))
            temp.handle.write(data)
            temp.finish()
        for temp, path in temps:
            os.replace(temp.name, path)
            renamed += 1
    except BaseException:
        for temp, _ in temps[renamed:]:
            temp.discard()
        raise
