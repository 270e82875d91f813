"""The render lock: one render into a folder at a time.

Two renders into the same folder at once: each takes an exclusive lock on ``.<name>.render-lock`` beside
``out`` (``flock``, released when the process ends, however it ends) before it looks at ``out``; the one
that finds it taken fails at once, changing nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from envbuild.errors import BundleError


def lock_path_for(out: Path) -> Path:
    return out.parent / f".{out.name}.render-lock"


@contextlib.contextmanager
def render_lock(out: Path) -> Iterator[None]:
    """Hold the exclusive render lock of ``out``, or raise :class:`BundleError` when another holds it.

    The lock is an ``flock`` on ``.<name>.render-lock`` beside ``out``; it ends with the process that
    holds it, even one killed.  The holder removes the file before it lets go, so none is left behind; a
    render that locked a file already removed (its inode no longer at the path) locks the new one."""
    path = lock_path_for(out)
    for _ in range(100):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            message = f"{path}: cannot create the render lock: {exc.strerror}; choose another --out"
            raise BundleError(message) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise BundleError(
                f"{out}: another envbuild render is writing this bundle now (it holds {path}); nothing "
                "was changed. Let it finish, or render into another --out"
            ) from None
        try:
            current = os.stat(path)
        except FileNotFoundError:
            current = None
        if current is not None and current.st_ino == os.fstat(fd).st_ino:
            break
        os.close(fd)  # the previous holder removed it after this render opened it: lock the new one
    else:  # pragma: no cover - a hundred holders in a row
        raise BundleError(f"{out}: could not take the render lock {path}; try again")
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
        os.close(fd)
