"""Build records from a ``docker save`` stream, and their comparison, without an engine.

The archives here are written by hand by :func:`saved_image` in the legacy layout the engine on these
machines (Docker 20.10) writes (``<id>/layer.tar`` + ``manifest.json``) and in the OCI layout newer
engines write (``blobs/sha256/<hex>`` + ``index.json``/``manifest.json``); the real engine's stream is
exercised by the end-to-end tests (tests/test_e2e.py).
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuild.errors import BuildError, BundleError
from envbuild.image.diff import diff_files, format_diff
from envbuild.image.record import Record, read_record
from envbuild.image.save_stream import read_saved_image

Member = tuple[str, str, bytes | str | None, int]  # (name, kind, content or link target, mode)


def layer_tar(members: list[Member]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, kind, content, mode in members:
            info = tarfile.TarInfo(name)
            info.mode = mode
            info.mtime = 1_700_000_000
            data = None
            if kind == "dir":
                info.type = tarfile.DIRTYPE
            elif kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, str(content)
            elif kind == "hardlink":
                info.type, info.linkname = tarfile.LNKTYPE, str(content)
            else:
                data = content if isinstance(content, bytes) else str(content or "").encode()
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def saved_image(layers: list[bytes], *, oci: bool = False) -> bytes:
    """A ``docker save`` archive holding ``layers`` in order (hand-written, see the module doc)."""
    buf = io.BytesIO()
    names: list[str] = []
    with tarfile.open(fileobj=buf, mode="w") as tar:

        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

        add("config.json" if not oci else "blobs/sha256/" + "c" * 64, b'{"rootfs": {}}')
        for i, data in enumerate(layers):
            digest = hashlib.sha256(data).hexdigest()
            name = f"blobs/sha256/{digest}" if oci else f"{i:064x}/layer.tar"
            add(name, data)
            names.append(name)
        add("manifest.json", json.dumps([{"Config": "config.json", "Layers": names}]).encode())
    return buf.getvalue()


def chunks(data: bytes, size: int = 1000) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


DPKG_STATUS = (
    "Package: libc6\nStatus: install ok installed\nArchitecture: amd64\nVersion: 2.36-9\n\n"
    "Package: removed-pkg\nStatus: deinstall ok config-files\nArchitecture: amd64\nVersion: 1.0\n"
)
BASE = [
    ("etc", "dir", None, 0o755),
    ("etc/hostname", "file", b"base\n", 0o644),
    ("opt/old", "dir", None, 0o755),
    ("opt/old/a.txt", "file", b"a", 0o644),
    ("var/lib/dpkg/status", "file", DPKG_STATUS, 0o644),
    ("var/lib/dpkg/info/libc6:amd64.list", "file", "/.\n/usr/lib/libc.so.6\n", 0o644),
    ("usr/lib/libc.so.6", "file", b"\x7fELF libc", 0o755),
    ("usr/lib/libc.so", "symlink", "libc.so.6", 0o777),
]
TOP = [
    ("etc/.wh.hostname", "file", b"", 0o644),  # deleted in the upper layer
    ("opt/old/.wh..wh..opq", "file", b"", 0o644),  # opaque: hides opt/old/a.txt
    ("opt/old/b.txt", "file", b"b", 0o600),
    ("venv/lib/site-packages/pkg/__init__.py", "file", b"x = 1\n", 0o644),
    ("venv/lib/site-packages/pkg-1.0.dist-info/METADATA", "file", "Name: Pkg\nVersion: 1.0\n", 0o644),
    ("venv/lib/site-packages/pkg-1.0.dist-info/INSTALLER", "file", "pip\n", 0o644),
    (
        "venv/lib/site-packages/pkg-1.0.dist-info/RECORD",
        "file",
        "pkg/__init__.py,sha256=abc,6\npkg-1.0.dist-info/METADATA,,\n",
        0o644,
    ),
    ("usr/lib/libc-copy.so.6", "hardlink", "usr/lib/libc.so.6", 0o755),
]


@pytest.mark.parametrize("oci", [False, True], ids=["legacy", "oci"])
def test_layers_flatten_with_whiteouts_and_diff_ids(oci: bool) -> None:
    base, top = layer_tar(BASE), layer_tar(TOP)
    files, diff_ids = read_saved_image(chunks(saved_image([base, top], oci=oci)))
    assert diff_ids == ["sha256:" + hashlib.sha256(x).hexdigest() for x in (base, top)]
    paths = files.entries
    assert "/etc/hostname" not in paths and "/etc" in paths  # whiteout
    assert "/opt/old/a.txt" not in paths and paths["/opt/old/b.txt"].mode == 0o600  # opaque dir
    assert paths["/usr/lib/libc.so"].type == "symlink" and paths["/usr/lib/libc.so"].link == "libc.so.6"
    copy = paths["/usr/lib/libc-copy.so.6"]  # a hardlink carries its target's content hash
    assert copy.type == "hardlink" and copy.sha256 == hashlib.sha256(b"\x7fELF libc").hexdigest()
    assert [(a.name, a.version, a.arch) for a in files.apt] == [("libc6", "2.36-9", "amd64")]
    assert [(d.name, d.version, d.installer) for d in files.python] == [("Pkg", "1.0", "pip")]
    assert files.owners["/usr/lib/libc.so.6"] == "deb:libc6"
    assert files.owners["/venv/lib/site-packages/pkg/__init__.py"] == "py:pkg@/venv/lib/site-packages"


def test_a_layer_missing_from_the_archive_is_an_error() -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:  # the manifest names a layer the archive lacks
        body = json.dumps([{"Config": "c.json", "Layers": ["gone/layer.tar"]}]).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    with pytest.raises(BuildError, match="lacks layer"):
        read_saved_image(chunks(buf.getvalue()))


def record_of(members: list[Member], tag: str) -> Record:
    files, diff_ids = read_saved_image(chunks(saved_image([layer_tar(BASE), layer_tar(members)])))
    return Record(tag=tag, image_id="sha256:" + "0" * 64, diff_ids=diff_ids, files=files, envbuild="test")


def test_identical_content_compares_equal_whatever_the_mtimes() -> None:
    a, b = record_of(TOP, "a"), record_of(TOP, "b")
    diff = diff_files(a.files, b.files)
    assert diff.identical and format_diff(diff)[0].startswith("identical on content")


def test_differences_are_classified_and_attributed() -> None:
    changed = [m for m in TOP if not m[0].startswith("venv/")]
    changed += [
        ("venv/lib/site-packages/pkg/__init__.py", "file", b"x = 2\n", 0o644),
        ("venv/lib/site-packages/pkg-1.1.dist-info/METADATA", "file", "Name: Pkg\nVersion: 1.1\n", 0o644),
        ("venv/lib/site-packages/pkg-1.1.dist-info/RECORD", "file", "pkg/__init__.py,,\n", 0o644),
        ("var/log/dpkg.log", "file", b"2026-12-01 install\n", 0o644),  # noise
        ("srv/new.txt", "file", b"new", 0o644),
    ]
    changed = [("opt/old/b.txt", "file", b"b", 0o644) if m[0] == "opt/old/b.txt" else m for m in changed]
    diff = diff_files(record_of(TOP, "a").files, record_of(changed, "b").files)
    assert not diff.identical
    (pkg,) = diff.packages
    assert (pkg.kind, pkg.before, pkg.after) == ("py", "1.0", "1.1") and pkg.paths >= 1
    by_path = {p.path: p for p in diff.paths}
    assert "/venv/lib/site-packages/pkg/__init__.py" not in by_path  # reported with its package
    assert by_path["/srv/new.txt"].klass == "content" and by_path["/srv/new.txt"].what == "added"
    mode = by_path["/opt/old/b.txt"]
    assert (mode.klass, mode.what, mode.before, mode.after) == ("metadata", "mode", "0o600", "0o644")
    assert "/var/log/dpkg.log" not in by_path and diff.noise == {"/var/log/*": 1}
    assert diff.counts() == {"package": 1, "content": 1, "metadata": 1}  # dist-info folders go with pkg


def test_record_round_trip_and_damage(tmp_path: Path) -> None:
    record = record_of(TOP, "envbuild-test/x:1")
    path = tmp_path / "build-x.record.json"
    record.write(path)
    again = read_record(path)
    assert again.files.entries == record.files.entries and again.diff_ids == record.diff_ids
    assert diff_files(record.files, again.files).identical
    columns = json.loads(path.read_text())["manifest_columns"]
    assert not [c for c in columns if "time" in c]  # no timestamps
    path.write_text('{"format": 99}')
    with pytest.raises(BundleError, match="not a build record"):
        read_record(path)
