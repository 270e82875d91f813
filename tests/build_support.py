"""Helpers shared by the build tests: a real self-signed CA made by openssl."""

from __future__ import annotations

import subprocess
from pathlib import Path


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
