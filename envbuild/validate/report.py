"""Write a report directory: report.json, report.md, junit.xml, raw facts, env.txt, the Blender stage's
rendered PNGs (``blender-cpu.png``, ...), report.html (one self-contained page, :func:`write_html`),
MANIFEST.sha256.  report.md is rendered by :mod:`envbuild.validate.markdown_report`, junit.xml by
:mod:`envbuild.validate.junit_report`.

Each run gets a new directory ``<UTC timestamp>-<random>`` (created with ``exist_ok=False``, never
reused).  Every file is written atomically (temporary file + rename) and scrubbed of secret values;
``MANIFEST.sha256`` (sha256sum format) is written last, so its presence means the report is complete.
"""

from __future__ import annotations

import re
import secrets
import shutil
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path

from envbuild import atomic
from envbuild.boundary import to_json
from envbuild.digest import sha256_file
from envbuild.errors import UsageError
from envbuild.validate.junit_report import render_junit
from envbuild.validate.markdown_report import render_markdown
from envbuild.validate.model import Report
from envbuild.validate.redact import env_lines, redact_text

MANIFEST = "MANIFEST.sha256"
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


IMAGE_NAME = re.compile(r"blender-[a-z]+\.png")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all (:func:`envbuild.atomic.write_bytes`); the :class:`OSError` of
    a failure (a full disk) names ``path``."""
    try:
        atomic.write_bytes(path, data)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc


def discard_run_dir(run_dir: Path) -> None:
    """Remove a run folder whose report could not be written whole (this run's files only)."""
    shutil.rmtree(run_dir, ignore_errors=True)


def atomic_write(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def env_text(env: Mapping[str, str]) -> str:
    """The allow-listed variables, redacted; the rest counted (:mod:`envbuild.validate.redact`)."""
    return env_lines(env)


def write_report(
    run_dir: Path,
    report: Report,
    raw: Mapping[str, str],
    env: Mapping[str, str],
    binary: Mapping[str, bytes] | None = None,
) -> None:
    """Write every file, then the manifest.  ``binary`` (file name -> bytes): the Blender renders, written
    as they are (a PNG holds no text to redact); only ``blender-*.png`` names are taken."""
    images = {n: b for n, b in (binary or {}).items() if IMAGE_NAME.fullmatch(n)}
    for name in sorted(images):
        atomic_write_bytes(run_dir / name, images[name])
    files: dict[str, str] = {name: text for name, text in raw.items() if name in RAW_FILES}
    files["env.txt"] = env_text(env)
    files["report.json"] = to_json(report, indent=2) + "\n"
    files["report.md"] = render_markdown(report)
    files["junit.xml"] = render_junit(report)
    for name in sorted(files):
        atomic_write(run_dir / name, redact_text(files[name], env))
    pages = {HTML: write_html(run_dir, images)}
    manifest = "".join(
        f"{sha256_file(run_dir / name)}  {name}\n" for name in sorted([*files, *images, *pages])
    )
    atomic_write(run_dir / MANIFEST, manifest)


HTML = "report.html"


def write_html(run_dir: Path, images: Mapping[str, bytes]) -> Path:
    """``report.html``, rendered from the report.json just written (redacted already), with ``images``
    inline (:mod:`envbuild.validate.html_report`).  Written as it is: the page's text comes from the
    redacted report, and redacting the base64 of a picture could only damage it."""
    import json

    from envbuild.validate.html_report import render_html

    data = json.loads((run_dir / "report.json").read_text(encoding="utf-8"))
    path = run_dir / HTML
    atomic_write(path, render_html(data, images))
    return path
