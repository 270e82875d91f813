"""Write a report folder: report.json, report.md, junit.xml, raw facts, env.txt, the Blender stage's
rendered PNGs (``blender-cpu.png``, ...), report.html (one self-contained page, :func:`write_html`),
then MANIFEST.sha256.  report.md is rendered by :mod:`envbuild.report.markdown`, junit.xml by
:mod:`envbuild.report.junit`, report.html by :mod:`envbuild.report.html`; the folder's names and its
atomic writes are :mod:`envbuild.report.folder`'s.

Every file is written atomically (temporary file + rename) and scrubbed of secret values;
``MANIFEST.sha256`` (sha256sum format) is written last, so its presence means the report is complete.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from envbuild.boundary import to_json
from envbuild.digest import sha256_file
from envbuild.report.folder import (
    HTML,
    IMAGE_NAME,
    MANIFEST,
    RAW_FILES,
    REPORT_JSON,
    atomic_write,
    atomic_write_bytes,
)
from envbuild.report.junit import render_junit
from envbuild.report.markdown import render_markdown
from envbuild.report.model import Report
from envbuild.report.redact import env_lines, redact_text


def env_text(env: Mapping[str, str]) -> str:
    """The allow-listed variables, redacted; the rest counted (:mod:`envbuild.report.redact`)."""
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
    files[REPORT_JSON] = to_json(report, indent=2) + "\n"
    files["report.md"] = render_markdown(report)
    files["junit.xml"] = render_junit(report)
    for name in sorted(files):
        atomic_write(run_dir / name, redact_text(files[name], env))
    pages = {HTML: write_html(run_dir, images)}
    manifest = "".join(
        f"{sha256_file(run_dir / name)}  {name}\n" for name in sorted([*files, *images, *pages])
    )
    atomic_write(run_dir / MANIFEST, manifest)


def write_html(run_dir: Path, images: Mapping[str, bytes]) -> Path:
    """``report.html``, rendered from the report.json just written (redacted already), with ``images``
    inline (:mod:`envbuild.report.html`).  Written as it is: the page's text comes from the
    redacted report, and redacting the base64 of a picture could only damage it."""
    import json

    from envbuild.report.html import render_html

    data = json.loads((run_dir / REPORT_JSON).read_text(encoding="utf-8"))
    path = run_dir / HTML
    atomic_write(path, render_html(data, images))
    return path
