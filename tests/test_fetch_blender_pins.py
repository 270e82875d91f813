"""Blender's tarball is checked against sha256s that do not come from beside it: the catalog's pin for
the release, and the one the bundle's lock recorded at its first fetch.

The tarballs are small stand-ins made here (a ``blender`` script in a .tar.xz named like the release,
with a consistent ``blender-4.5.3.sha256`` beside it: what a tampered mirror serves), as in
tests/test_build_fetch_blender.py.  The bundle is the tiny test bundle with a lock written by hand for
the built-in ``blender`` profile (official 4.5.3, no Python distributions).  Catalog rows labelled
hand-made are test rows, not data.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import tarfile
from pathlib import Path

import pytest
from blender_support import SUMS, TARBALL, release, unpinned

from envbuild.catalog import Catalog, load_catalog
from envbuild.catalog.blender_rows import BlenderTarball
from envbuild.errors import BuildError
from envbuild.image.fetch import fetch, fetch_blender
from envbuild.models import Lock, lock_json, read_lock
from envbuild.plan import check
from envbuild.profile import load_profile
from envbuild.render import make_lock

TINY = Path(__file__).parent / "data" / "bundles" / "tiny"
REAL_4_5_3 = "975c58fcb244273838534bba771e64ad87739216b0f9b39a888531a49a72d845"


def _lock() -> Lock:
    return make_lock(check(load_profile("blender")).plan)


def _pinned(sha256: str) -> Catalog:
    """The catalog with one hand-made pin for 4.5.3 (a test row)."""
    catalog = unpinned()
    row = BlenderTarball(version="4.5.3", sha256=sha256, tier="unconfirmed", source="hand-made test row")
    return dataclasses.replace(catalog, blender=dataclasses.replace(catalog.blender, tarball=(row,)))


def _blender_bundle(folder: Path) -> Path:
    """The tiny bundle with the blender profile's lock, marked resolved by hand (nothing to resolve)."""
    bundle = folder / "bundle"
    shutil.copytree(TINY, bundle)
    lock = dataclasses.replace(_lock(), resolved=True)
    (bundle / "envbuild.lock.json").write_text(lock_json(lock), encoding="utf-8")
    return bundle


def test_the_catalog_pins_the_real_4_5_3_tarball(tmp_path: Path) -> None:
    """A tarball whose checksum list beside it agrees with it is still refused: it is not the pinned one."""
    assert load_catalog().blender.pinned("4.5.3") is not None
    assert load_catalog().blender.pinned("4.5.15") is None  # no published value found: not pinned
    release(tmp_path / "mirror")
    dest = tmp_path / "wheelhouse"
    dest.mkdir()
    with pytest.raises(BuildError, match=rf"the catalog's pin .* is {REAL_4_5_3}; nothing was fetched"):
        fetch_blender(_lock(), dest, str(tmp_path / "mirror" / TARBALL))
    assert list(dest.iterdir()) == []


def test_a_pin_needs_no_checksum_list_beside_the_tarball(tmp_path: Path) -> None:
    digest = release(tmp_path / "mirror")
    (tmp_path / "mirror" / SUMS).unlink()
    dest = tmp_path / "wheelhouse"
    dest.mkdir()
    got = fetch_blender(_lock(), dest, str(tmp_path / "mirror" / TARBALL), catalog=_pinned(digest))
    assert got is not None and got.sha256 == digest and got.checksums_source == ""
    assert len(got.checked_against) == 1 and "hand-made test row" in got.checked_against[0]
    assert (dest / SUMS).read_text() == f"{digest}  {TARBALL}\n"  # for the Dockerfile's sha256sum -c


def test_a_pin_and_a_lock_that_disagree_stop_before_any_download(tmp_path: Path) -> None:
    digest = release(tmp_path / "mirror")
    lock = dataclasses.replace(_lock(), blender_sha256="a" * 64)
    dest = tmp_path / "wheelhouse"
    dest.mkdir()
    with pytest.raises(BuildError, match=rf"is sha256 {digest}, but the bundle's envbuild.lock.json"):
        fetch_blender(lock, dest, str(tmp_path / "mirror" / TARBALL), catalog=_pinned(digest))
    assert list(dest.iterdir()) == []


def test_the_first_fetch_records_the_sha256_and_a_later_tarball_must_match(tmp_path: Path) -> None:
    bundle = _blender_bundle(tmp_path)
    assert "blender_sha256" not in (bundle / "envbuild.lock.json").read_text()  # as locks were before
    digest = release(tmp_path / "first")
    fetch(bundle, tools=False, blender_tarball=str(tmp_path / "first" / TARBALL), catalog=unpinned())
    assert read_lock(bundle / "envbuild.lock.json").blender_sha256 == digest
    assert json.loads((bundle / "envbuild.lock.json").read_text())["blender_sha256"] == digest

    other = tmp_path / "other"  # another file by the same name, and no checksum list beside it
    other.mkdir()
    (other / "blender").write_text("#!/bin/sh\necho tampered\n")
    with tarfile.open(other / TARBALL, "w:xz") as tar:
        tar.add(other / "blender", arcname="blender-4.5.3-linux-x64/blender")
    actual = hashlib.sha256((other / TARBALL).read_bytes()).hexdigest()
    house = tmp_path / "house"
    with pytest.raises(BuildError) as failed:
        fetch(bundle, house, tools=False, blender_tarball=str(other / TARBALL), catalog=unpinned())
    message = str(failed.value)
    assert f"{TARBALL} from {(other / TARBALL).as_uri()} has sha256 {actual}" in message
    assert (
        f"the bundle's envbuild.lock.json (blender_sha256, recorded at its first fetch) expects {digest}"
        in message
    )
    assert not [p.name for p in house.iterdir() if TARBALL in p.name]  # neither the tarball nor a part of it
    assert not (house / SUMS).exists()
    assert read_lock(bundle / "envbuild.lock.json").blender_sha256 == digest  # unchanged


OFFICIAL_CPU = """\
# hand-made test profile: official Blender 4.5.3 on the CPU, no Python packages
name = "blender-official-cpu"
kind = "blender"
[base]
os = "debian12"
[accelerator]
backend = "cpu"
[python]
version = "3.11"
[blender]
version = "4.5.3"
source = "official"
devices = ["CPU"]
"""


def test_locking_again_keeps_the_recorded_sha256(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real render, `envbuild lock` against a loopback index (tests/index_support.py), a fetch that
    records the sha256, then a second lock: the recorded value stays."""
    from index_support import build_index_tree, serve_tree

    from envbuild.lock import lock_bundle
    from envbuild.render import render_bundle

    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    (tmp_path / "profile.toml").write_text(OFFICIAL_CPU, encoding="utf-8")
    bundle = tmp_path / "bundle"
    render_bundle(check(load_profile(str(tmp_path / "profile.toml"))), bundle, command="envbuild render")
    digest = release(tmp_path / "mirror")
    with serve_tree(build_index_tree(tmp_path / "universe")) as urls:
        assert lock_bundle(bundle, index_urls=(urls.main,)).lock is not None
        fetch(bundle, tools=False, blender_tarball=str(tmp_path / "mirror" / TARBALL), catalog=unpinned())
        assert read_lock(bundle / "envbuild.lock.json").blender_sha256 == digest
        again = lock_bundle(bundle, index_urls=(urls.main,)).lock
    assert again is not None and again.blender_sha256 == digest
    assert read_lock(bundle / "envbuild.lock.json").blender_sha256 == digest


def test_a_malformed_pin_names_the_key() -> None:
    with pytest.raises(ValueError, match="sha256: 'ABC' is not a valid sha256"):
        BlenderTarball(version="4.5.3", sha256="ABC", tier="S", source="hand-made test row")
