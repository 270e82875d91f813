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
