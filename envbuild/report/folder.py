"""A report folder's names and how its files are written.

``MANIFEST.sha256`` (:data:`MANIFEST`, sha256sum format) lists every file and is written last, so its
presence means the report is complete; ``MANIFEST.sha256.sig`` (:data:`SIGNATURE`, made by
:mod:`envbuild.report.sign`) sits beside it, outside its list: the manifest covers the files, the
signature covers the manifest.  Each run gets a new folder ``<UTC timestamp>-<random>`` (created with
``exist_ok=False``, never reused); every file is written whole or not at all.
"""

from __future__ import annotations

import re
import secrets
import shutil
from datetime import datetime, timezone
from pathlib import Path

from envbuild import atomic
from envbuild.errors import UsageError

MANIFEST = "MANIFEST.sha256"
SIGNATURE = MANIFEST + ".sig"
REPORT_JSON = "report.json"
HTML = "report.html"
RAW_FILES = frozenset(
    {
        "pip-freeze.txt",
        "os-release",
        "nvidia-smi.txt",
        "nvidia-smi.xml",
        "nvidia-smi-query.csv",
        "amd-smi.json",
        "rocm-smi.json",
    }
)
IMAGE_NAME = re.compile(r"blender-[a-z]+\.png")


def new_run_dir(out: Path) -> Path:
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot create the report folder: {exc.strerror or exc}") from None
    for _ in range(20):
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        path = out / f"{stamp}-{secrets.token_hex(3)}"
        try:
            path.mkdir(exist_ok=False)
        except FileExistsError:
            continue
        return path
    raise UsageError(f"--out {out}: could not create a fresh run folder")  # pragma: no cover


def discard_run_dir(run_dir: Path) -> None:
    """Remove a run folder whose report could not be written whole (this run's files only)."""
    shutil.rmtree(run_dir, ignore_errors=True)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all (:func:`envbuild.atomic.write_bytes`); the :class:`OSError` of
    a failure (a full disk) names ``path``."""
    try:
        atomic.write_bytes(path, data)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc


def atomic_write(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))
