"""Helpers shared by the build and end-to-end tests: the CLI in a subprocess, uuid-tagged images
removed afterwards, and a real self-signed CA made by openssl."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any


def envbuild(
    *args: str | Path, timeout: int = 900, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m envbuild ARGS`` (the PyTorch index is unreachable here: no pip retries)."""
    return subprocess.run(
        [sys.executable, "-m", "envbuild", *map(str, args)],
        capture_output=True,
        text=True,
        env={**os.environ, "PIP_RETRIES": "0", **(env or {})},
        timeout=timeout,
    )


@contextmanager
def temporary_tag(client: Any, name: str) -> Iterator[str]:
    """A unique image tag, removed (with its image) when the block ends."""
    tag = f"envbuild-test/{name}:{uuid.uuid4().hex[:12]}"
    try:
        yield tag
    finally:
        with suppress(Exception):  # the image may never have been built
            client.images.remove(tag, force=True)


def make_ca(folder: Path, stem: str = "corp-ca") -> tuple[Path, Path]:
    """A self-signed CA valid for two days: (``folder/stem.pem``, ``folder/stem.key``)."""
    cert, key = folder / f"{stem}.pem", folder / f"{stem}.key"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"),
            *("-subj", "/CN=test CA", "-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


@contextmanager
def small_tmpfs(where: Path, size_kib: int) -> Iterator[Path]:
    """A real, small filesystem mounted at ``where`` (a tmpfs of ``size_kib`` KiB), unmounted afterwards.

    Needs root (CI runs the tests as root); failing to mount fails the test rather than skipping it.
    """
    import pytest

    where.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_kib}k,mode=0755", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs at {where} (root needed): {proc.stderr.strip()}", pytrace=False)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)


def fill_up(folder: Path, name: str = "filler") -> Path:
    """Write ``folder/name`` until the filesystem says ENOSPC; the file stays (the disk stays full)."""
    import errno

    path = folder / name
    block = b"\0" * 4096
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        while True:
            try:
                os.write(fd, block)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
        # the last partial page too: a filesystem that rounds down can still take a few bytes
        with suppress(OSError):
            while os.write(fd, b"\0"):
                pass
    finally:
        os.close(fd)
    return path


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative POSIX path -> bytes): a whole-tree snapshot to compare."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
