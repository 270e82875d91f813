"""``envbuild fetch`` and the official Blender tarball (``blender.source = "official"``).

download.blender.org is not reachable from here, so every tarball below is a small stand-in written by
hand (a ``blender`` shell script in a .tar.xz named like the release), with a checksum list in the
format of Blender's published ``blender-X.Y.Z.sha256`` (``<sha256>  <file name>`` per platform), served
from a folder (``--blender-tarball PATH``) or from a loopback HTTP server (``--blender-tarball URL``).
The catalog pins the real 4.5.3 tarball's sha256, which no stand-in has: these tests use the catalog
without its ``[[tarball]]`` pins (``unpinned``); tests/test_fetch_blender_pins.py tests the pins.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import dockerfile
import pytest
from blender_support import SUMS, TARBALL, release, unpinned
from index_support import serve_folder

from envbuild.errors import BuildError, UsageError
from envbuild.image.fetch import fetch_blender
from envbuild.models import Lock
from envbuild.plan import check
from envbuild.profile import load_profile
from envbuild.render import make_lock, render_dockerfile


@pytest.fixture
def lock() -> Lock:
    """The built-in ``blender`` profile's lock (official 4.5.3)."""
    made = make_lock(check(load_profile("blender")).plan)
    assert made.blender_source == "official" and made.blender_version == "4.5.3"
    return made


@pytest.fixture
def http_folder(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    root = tmp_path / "served"
    root.mkdir()
    with serve_folder(root) as base:
        yield root, base


def test_local_tarball_with_its_checksum_list_beside_it(lock: Lock, tmp_path: Path) -> None:
    digest = release(tmp_path / "download")
    dest = tmp_path / "wheelhouse"
    dest.mkdir()
    got = fetch_blender(lock, dest, str(tmp_path / "download" / TARBALL), catalog=unpinned())
    assert got is not None and got.downloaded and got.sha256 == digest
    assert hashlib.sha256((dest / TARBALL).read_bytes()).hexdigest() == digest
    assert (dest / SUMS).read_text() == (tmp_path / "download" / SUMS).read_text()
    again = fetch_blender(lock, dest, str(tmp_path / "download" / TARBALL), catalog=unpinned())
    assert again is not None and not again.downloaded  # kept: already there with the published sha256


def test_tarball_url_with_the_list_beside_it(
    lock: Lock, tmp_path: Path, http_folder: tuple[Path, str]
) -> None:
    root, base = http_folder
    digest = release(root / "mirror")
    dest = tmp_path / "wheelhouse"
    dest.mkdir()
    got = fetch_blender(lock, dest, f"{base}/mirror/{TARBALL}", catalog=unpinned())
    assert got is not None and got.sha256 == digest and got.checksums_source == f"{base}/mirror/{SUMS}"
    assert (dest / TARBALL).is_file()


def test_a_tarball_that_does_not_match_its_published_line_is_not_kept(lock: Lock, tmp_path: Path) -> None:
    release(tmp_path / "download", listed=b"the real release")
    dest = tmp_path / "wheelhouse"
    dest.mkdir()
    with pytest.raises(
        BuildError,
        match=r"has sha256 [0-9a-f]{64}, but Blender's blender-4\.5\.3\.sha256 beside it .* expects [0-9a-f]",
    ):
        fetch_blender(lock, dest, str(tmp_path / "download" / TARBALL), catalog=unpinned())
    assert not (dest / TARBALL).exists() and not (dest / SUMS).exists()


def test_a_list_without_the_tarball(lock: Lock, tmp_path: Path) -> None:
    release(tmp_path / "download")
    sums = tmp_path / "download" / SUMS
    sums.write_text(sums.read_text().replace(TARBALL, "blender-4.5.2-linux-x64.tar.xz"))
    with pytest.raises(BuildError, match=f"has no line for {re.escape(TARBALL)}"):
        fetch_blender(lock, tmp_path, str(tmp_path / "download" / TARBALL), catalog=unpinned())


def test_missing_path_and_a_pypi_lock_are_usage_errors(lock: Lock, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"--blender-tarball .*: no such file"):
        fetch_blender(lock, tmp_path, str(tmp_path / "nowhere.tar.xz"), catalog=unpinned())
    pypi = make_lock(check(load_profile("blender-cpu")).plan)
    with pytest.raises(UsageError, match=r'--blender-tarball: .*blender.source = "pypi"'):
        fetch_blender(pypi, tmp_path, str(tmp_path / "x.tar.xz"))
    assert fetch_blender(pypi, tmp_path) is None  # bpy is a locked wheel: nothing else to fetch


def test_the_dockerfile_uses_the_fetched_tarball_without_downloading(lock: Lock, tmp_path: Path) -> None:
    """The rendered blender stage, run with bash as written, on a wheelhouse filled by fetch_blender:
    ``curl`` is replaced by ``false`` (any download would fail the step) and /opt/blender by a folder."""
    release(tmp_path / "download")
    house = tmp_path / "wheelhouse"
    house.mkdir()
    fetch_blender(lock, house, str(tmp_path / "download" / TARBALL), catalog=unpinned())
    text = render_dockerfile(check(load_profile("blender")).plan)
    commands = dockerfile.parse_string(text)
    copy = next(c for c in commands if c.cmd == "COPY" and c.value[-1] == "/tmp/blender/")
    assert copy.value[0] == "wheelhouse/"
    script = next(c.value[0] for c in commands if c.cmd == "RUN" and "sha256sum -c" in c.value[0])
    opt = tmp_path / "opt-blender"
    script = script.replace("curl ", "false ").replace("/opt/blender", str(opt))
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", script], cwd=house, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert (opt / "blender").read_text().startswith("#!/bin/sh")
    assert not (house / TARBALL).exists()  # removed after extraction
