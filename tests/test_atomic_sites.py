"""No temporary file is left behind when a write fails, at any of the sites that write a file atomically.

Each test calls a site's real function with a real failure: the file it writes is, beforehand, a
non-empty folder, so the final rename is refused (the simplest failure that applies to every site, and
one a failed disk gives too).  The folder must then hold what it held before (plus, where noted, the
files the function wrote whole before reaching the failing one) and no temporary file.  Nothing of
envbuild is faked; the one stand-in is a Docker API object for the built-wheel export, which reads a
tar from the engine.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
import tarfile
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from blender_support import SUMS, TARBALL, release, unpinned
from build_support import lock_by_hand

from envbuild import __version__
from envbuild.errors import BuildError, BundleError
from envbuild.models import Lock, read_lock

TINY = Path(__file__).parent / "data" / "bundles" / "tiny"


def _block(path: Path) -> Path:
    """Make ``path`` a non-empty folder: a file written there cannot be renamed onto it."""
    path.mkdir(parents=True)
    (path / "in-the-way").write_text("kept\n", encoding="utf-8")
    return path


def _tree(folder: Path) -> list[str]:
    """Every entry under ``folder``, hidden ones included."""
    out = []
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            out.append(Path(root, name).relative_to(folder).as_posix())
    return sorted(out)


def _tiny_lock(folder: Path) -> tuple[Path, Lock]:
    bundle = folder / "tiny"
    shutil.copytree(TINY, bundle)
    lock_by_hand(bundle)
    return bundle, read_lock(bundle / "envbuild.lock.json")


@dataclasses.dataclass(frozen=True)
class Row:  # what the catalog cache stores: a plain dataclass
    name: str


def test_catalog_cache_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from envbuild.catalog import cache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    data = tmp_path / "cards.toml"
    _block(cache.slot(data, Row))
    before = _tree(tmp_path / "xdg")
    cache.store(data, Row, b"0" * 64, Row("x"))  # a failed store is not an error: the cache is as it was
    assert _tree(tmp_path / "xdg") == before


def test_catalog_overlay_write(tmp_path: Path) -> None:
    from envbuild.catalog import overlay
    from envbuild.catalog.overlay import IndexRead, Overlay

    path = _block(tmp_path / "catalog-overlay.json")
    before = _tree(tmp_path)
    made = Overlay(
        format=1,
        fetched_at=datetime.now(timezone.utc),
        envbuild_version="test",
        indexes=(IndexRead(kind="pypi", url="http://127.0.0.1:1/simple/", ok=True),),
    )
    with pytest.raises(IsADirectoryError):
        overlay.write(path, made)
    assert _tree(tmp_path) == before


def test_lock_write_locked(tmp_path: Path) -> None:
    """The requirements file is blocked: the README may be renamed before it, the files after it (the
    lock last) are not, and none of their temporary files stays."""
    from envbuild.lock.resolve import Resolved
    from envbuild.lock.write import LOCK, REQUIREMENTS, write_locked

    bundle, lock = _tiny_lock(tmp_path)
    assert lock.resolution is not None
    (bundle / REQUIREMENTS).unlink()
    _block(bundle / REQUIREMENTS)
    before, lock_bytes = _tree(bundle), (bundle / LOCK).read_bytes()
    with pytest.raises(IsADirectoryError):
        write_locked(bundle, lock, Resolved(lock.distributions, (), lock.resolution))
    assert _tree(bundle) == before
    assert (bundle / LOCK).read_bytes() == lock_bytes


def _wheel_lock(bundle: Path, lock: Lock, wheel: Path, url: str) -> Lock:
    """``lock`` with one distribution: ``wheel``, from ``url`` ("" for a local --find-links folder)."""
    import hashlib

    path = bundle / "envbuild.lock.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["distributions"] = [
        {
            "name": "leftpad",
            "version": "1.0",
            "files": [
                {"filename": wheel.name, "url": url, "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()}
            ],
            "index": "https://pypi.org/simple",
        }
    ]
    path.write_text(json.dumps(data), encoding="utf-8")
    return read_lock(path)


@pytest.mark.parametrize("source", ["url", "find-links"])
def test_wheelhouse_download_locked(tmp_path: Path, source: str) -> None:
    """A wheel downloaded (net.download, from a file: URL) or copied from a local --find-links folder."""
    from envbuild.image.wheelhouse import download_locked

    bundle, lock = _tiny_lock(tmp_path)
    links = tmp_path / "links"
    links.mkdir()
    wheel = links / "leftpad-1.0-py3-none-any.whl"
    wheel.write_bytes(b"a wheel stand-in: its sha256 is what the lock says")
    lock = _wheel_lock(bundle, lock, wheel, wheel.as_uri() if source == "url" else "")
    house = tmp_path / "house"
    _block(house / wheel.name)
    before = _tree(house)
    with pytest.raises(BuildError, match="Is a directory"):
        download_locked(lock, house, find_links=(str(links),))
    assert _tree(house) == before


def test_record_write(tmp_path: Path) -> None:
    from envbuild.image.record import ImageFiles, Record

    path = _block(tmp_path / "record.json")
    before = _tree(tmp_path)
    record = Record(
        tag="envbuild-test/x:1",
        image_id="sha256:" + "0" * 64,
        diff_ids=[],
        files=ImageFiles(entries={}, apt=[]),
    )
    with pytest.raises(BundleError, match="cannot write the build record"):
        record.write(path)
    assert _tree(tmp_path) == before


def test_selfwheel_build_self_wheel(tmp_path: Path) -> None:
    from envbuild.image.selfwheel import build_self_wheel

    _block(tmp_path / f"envbuild-{__version__}-py3-none-any.whl")
    before = _tree(tmp_path)
    with pytest.raises(IsADirectoryError):
        build_self_wheel(tmp_path)
    assert _tree(tmp_path) == before


@pytest.fixture
def blender_lock() -> Lock:
    from envbuild.plan import check
    from envbuild.profile import load_profile
    from envbuild.render import make_lock

    return make_lock(check(load_profile("blender")).plan)


@pytest.mark.parametrize("blocked", [TARBALL, SUMS])
def test_blender_fetch_blender(tmp_path: Path, blender_lock: Lock, blocked: str) -> None:
    """The tarball (net.download, from the file: URL of ``--blender-tarball PATH``), or its checksum list
    written after it."""
    from envbuild.image.blender import fetch_blender

    release(tmp_path / "mirror")
    dest = tmp_path / "wheelhouse"
    _block(dest / blocked)
    before = _tree(dest)
    with pytest.raises((BuildError, IsADirectoryError)):
        fetch_blender(blender_lock, dest, str(tmp_path / "mirror" / TARBALL), catalog=unpinned())
    fetched = [TARBALL] if blocked == SUMS else []  # the tarball, whole and checked, before the list
    assert _tree(dest) == sorted(before + fetched)


def test_blender_record_sha256(tmp_path: Path, blender_lock: Lock) -> None:
    from envbuild.image.blender import LOCK_FILE, record_sha256

    _block(tmp_path / LOCK_FILE)
    before = _tree(tmp_path)
    with pytest.raises(BuildError, match="cannot record Blender's sha256"):
        record_sha256(tmp_path, blender_lock, "a" * 64)
    assert _tree(tmp_path) == before


class _Engine:
    """The Docker API calls export_built makes, over a ``built/`` tar made here."""

    def __init__(self, files: dict[str, bytes]) -> None:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            for name, data in files.items():
                info = tarfile.TarInfo(f"built/{name}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        self.tar = buffer.getvalue()
        self.removed: list[str] = []

    def create_container(self, image: str, command: list[str]) -> str:
        return "c0ffee"

    def get_archive(self, container: str, path: str) -> tuple[Iterator[bytes], dict[str, Any]]:
        return iter([self.tar]), {}

    def remove_container(self, container: str, force: bool) -> None:
        self.removed.append(container)


def test_built_cache_export_built(tmp_path: Path) -> None:
    from envbuild.image.built_cache import BUILT, export_built

    wheel = "ext-1.0-cp311-cp311-linux_x86_64.whl"
    _block(tmp_path / BUILT / wheel)
    before = _tree(tmp_path)
    engine = _Engine({wheel: b"a built wheel stand-in"})
    with pytest.raises(IsADirectoryError):
        export_built(engine, "sha256:" + "1" * 64, tmp_path)
    assert engine.removed == ["c0ffee"]
    assert _tree(tmp_path) == before


def test_fetch_write_sha256sums(tmp_path: Path) -> None:
    from envbuild.image.fetch import write_sha256sums

    (tmp_path / "a-1.0-py3-none-any.whl").write_bytes(b"a wheel stand-in")
    _block(tmp_path / "SHA256SUMS")
    before = _tree(tmp_path)
    with pytest.raises(BuildError, match="cannot write"):
        write_sha256sums(tmp_path)
    assert _tree(tmp_path) == before


def test_render_recovery_journal(tmp_path: Path) -> None:
    """The journal a render writes (fsynced) before it moves kept entries into the new tree."""
    from envbuild.render.recovery import JOURNAL, write_journal

    old = tmp_path / ".bundle.old-x"
    _block(old / JOURNAL)
    before = _tree(tmp_path)
    with pytest.raises(IsADirectoryError):
        write_journal(old, [("app", "app")])
    assert _tree(tmp_path) == before


@pytest.mark.slow
def test_tools_fetch_tools(tmp_path: Path) -> None:
    """tools/requirements.txt, written after envbuild's wheel and its dependencies (locked with uv
    against PyPI, as ``envbuild fetch`` does) are in the folder."""
    from envbuild.image.tools import REQUIREMENTS, fetch_tools

    _, lock = _tiny_lock(tmp_path)
    tools = tmp_path / "tools"
    _block(tools / REQUIREMENTS)
    before = _tree(tools)
    with pytest.raises(IsADirectoryError):
        fetch_tools(lock, tools)
    new = [name for name in _tree(tools) if name not in before]
    assert new and all(name.endswith(".whl") and not name.startswith(".") for name in new), new
