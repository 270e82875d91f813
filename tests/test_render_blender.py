"""The Blender stage's download check, run for real with bash on a local stand-in tarball.

The rendered RUN instruction is executed as written, except that the two ``curl`` downloads become
copies of local files and ``/opt/blender`` a temporary folder (no network here).  A tampered
tarball, or a checksum file without the tarball's line, must stop the build before extraction.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import dockerfile
import pytest
from render_support import BLENDER, cuda_plan

from envbuild.render import render_dockerfile

TARBALL = "blender-4.5.3-linux-x64.tar.xz"
CHECKSUMS = "blender-4.5.3.sha256"


def blender_run() -> str:
    commands = dockerfile.parse_string(render_dockerfile(cuda_plan(**BLENDER)))
    return next(c.value[0] for c in commands if c.cmd == "RUN" and "sha256sum -c" in c.value[0])


def make_release(src: Path) -> bytes:
    payload = src / "blender-4.5.3-linux-x64"
    payload.mkdir(parents=True)
    (payload / "blender").write_text("#!/bin/sh\necho blender\n")
    with tarfile.open(src / TARBALL, "w:xz") as tar:
        tar.add(payload, arcname=payload.name)
    shutil.rmtree(payload)
    return (src / TARBALL).read_bytes()


def run_stage(tmp_path: Path, checksum_lines: list[str]) -> subprocess.CompletedProcess[str]:
    src, work, opt = tmp_path / "src", tmp_path / "work", tmp_path / "opt-blender"
    work.mkdir()
    (src / CHECKSUMS).write_text("".join(line + "\n" for line in checksum_lines))
    script = blender_run()
    script = re.sub(r"curl -fsSL --retry 3 -o (\S+) \S+", rf"cp {src}/\1 \1", script)
    script = script.replace("/opt/blender", str(opt))
    assert "curl" not in script and "sha256sum -c -" in script
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", script], cwd=work, capture_output=True, text=True, check=False
    )


def test_verified_tarball_is_extracted(tmp_path: Path) -> None:
    digest = hashlib.sha256(make_release(tmp_path / "src")).hexdigest()
    other = "f" * 64 + "  blender-4.5.3-windows-x64.zip"
    proc = run_stage(tmp_path, [other, f"{digest}  {TARBALL}"])
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "opt-blender" / "blender").read_text().startswith("#!/bin/sh")
    assert not (tmp_path / "work" / TARBALL).exists()


NO_LINE = "sha256sum: 'standard input': no properly formatted checksum lines found"  # grep kept none


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("tampered", "sha256sum: WARNING: 1 computed checksum did NOT match"),
        ("missing-line", NO_LINE),
        ("near-miss-name", NO_LINE),
    ],
)
def test_bad_checksum_stops_before_extraction(tmp_path: Path, case: str, message: str) -> None:
    digest = hashlib.sha256(make_release(tmp_path / "src")).hexdigest()
    lines = {
        "tampered": ["0" * 64 + f"  {TARBALL}"],
        "missing-line": ["f" * 64 + "  blender-4.5.3-macos-arm64.dmg"],
        "near-miss-name": [f"{digest}  {TARBALL}.old", "0" * 64 + f"  x{TARBALL}"],
    }[case]
    proc = run_stage(tmp_path, lines)
    assert proc.returncode == 1, proc.stderr  # sha256sum -c's exit status, through pipefail
    assert message in proc.stderr
    if case == "tampered":
        assert f"{TARBALL}: FAILED" in proc.stdout
    assert not (tmp_path / "opt-blender").exists()
