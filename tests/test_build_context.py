"""The build context: deterministic bytes, .dockerignore, external wheelhouse, CA certs, refusals."""

from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path

import pytest
from build_support import make_ca

from envbuild.errors import BundleError, UsageError
from envbuild.image.certs import load_ca_cert, load_ca_certs
from envbuild.image.context import FIXED_MTIME, write_context
from envbuild.image.fetch import write_sha256sums

TINY = Path(__file__).parent / "data" / "bundles" / "tiny"


@pytest.fixture()
def bundle(tmp_path: Path) -> Path:
    out = tmp_path / "tiny"
    shutil.copytree(TINY, out)
    return out


@pytest.fixture(scope="module")
def ca_pem(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A real self-signed CA made by openssl: (certificate, private key)."""
    return make_ca(tmp_path_factory.mktemp("ca"))


def members(bundle: Path, **kwargs: object) -> tuple[dict[str, tarfile.TarInfo], dict[str, bytes], str]:
    buf = io.BytesIO()
    info = write_context(bundle, buf, **kwargs)  # type: ignore[arg-type]
    buf.seek(0)
    with tarfile.open(fileobj=buf) as tar:
        entries = {m.name: m for m in tar.getmembers()}
        data = {m.name: tar.extractfile(m).read() for m in entries.values() if m.isfile()}  # type: ignore[union-attr]
    return entries, data, info.sha256


def test_context_is_deterministic_and_normalised(bundle: Path) -> None:
    first = members(bundle)
    (bundle / "app" / "hello.py").touch()  # a new mtime must not change the bytes
    (bundle / "app" / "hello.py").chmod(0o600)
    second = members(bundle)
    assert first[2] == second[2]
    for info in first[0].values():
        assert info.mtime == FIXED_MTIME and info.uid == 0 and info.gid == 0 and info.uname == ""
        assert info.mode in (0o644, 0o755)
    assert {"Dockerfile", "envbuild.lock.json", "app/hello.py", "wheelhouse/.keep"} <= set(first[0])


def test_creation_order_and_location_do_not_matter(bundle: Path, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere" / "copy"
    files = sorted((p for p in bundle.rglob("*") if p.is_file()), reverse=True)
    for path in files:  # create in reverse order: a different directory order on disk
        target = other / path.relative_to(bundle)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    assert members(other)[2] == members(bundle)[2]


def test_content_change_changes_the_digest(bundle: Path) -> None:
    before = members(bundle)[2]
    (bundle / "app" / "hello.py").write_text("print('changed')\n")
    assert members(bundle)[2] != before


def test_dockerignore_and_build_logs_are_left_out(bundle: Path) -> None:
    (bundle / "build-envbuild-x-1.log").write_text("old log")
    (bundle / "app" / "__pycache__").mkdir()
    (bundle / "app" / "__pycache__" / "hello.cpython-311.pyc").write_bytes(b"\0")
    names = set(members(bundle)[0])
    assert "build-envbuild-x-1.log" not in names
    assert "README.md" not in names  # listed in the tiny bundle's .dockerignore
    assert not any("__pycache__" in n for n in names)


def test_external_wheelhouse_replaces_the_bundle_one(bundle: Path, tmp_path: Path) -> None:
    (bundle / "wheelhouse" / "stale-1.0-py3-none-any.whl").write_bytes(b"stale")
    house = tmp_path / "house"
    house.mkdir()
    (house / "six-1.17.0-py2.py3-none-any.whl").write_bytes(b"wheel bytes")
    write_sha256sums(house)
    (house / "notes.txt").write_text("not a wheel")
    entries, data, _ = members(bundle, wheelhouse=house)
    wheel_names = sorted(n for n in entries if n.startswith("wheelhouse/"))
    assert wheel_names == [
        "wheelhouse/.keep",
        "wheelhouse/SHA256SUMS",
        "wheelhouse/six-1.17.0-py2.py3-none-any.whl",
    ]
    assert data["wheelhouse/six-1.17.0-py2.py3-none-any.whl"] == b"wheel bytes"


def test_missing_wheelhouse_is_a_clear_error(bundle: Path, tmp_path: Path) -> None:
    with pytest.raises(BundleError, match=r"--wheelhouse .*not a directory"):
        members(bundle, wheelhouse=tmp_path / "nope")


def test_incomplete_bundle_names_the_missing_files(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    with pytest.raises(BundleError, match=r"missing envbuild.lock.json, requirements-rebuild.txt"):
        members(tmp_path)


def test_symlink_out_of_the_bundle_is_refused(bundle: Path) -> None:
    (bundle / "app" / "passwd").symlink_to("/etc/passwd")
    with pytest.raises(BundleError, match="points outside the bundle"):
        members(bundle)


def test_symlink_inside_the_bundle_is_kept_as_a_link(bundle: Path) -> None:
    (bundle / "app" / "again.py").symlink_to("hello.py")
    entries = members(bundle)[0]
    assert entries["app/again.py"].issym() and entries["app/again.py"].linkname == "hello.py"


def test_ca_certs_go_into_the_context_only(bundle: Path, ca_pem: tuple[Path, Path]) -> None:
    cert = load_ca_cert(ca_pem[0])
    _entries, data, _ = members(bundle, ca_certs=(cert,))
    assert cert.name.endswith(".crt") and cert.name.startswith("envbuild-corp-ca-")
    assert data[f"certs/{cert.name}"].startswith(b"-----BEGIN CERTIFICATE-----")
    assert not (bundle / "certs" / cert.name).exists()  # the bundle on disk is untouched


def test_ca_cert_with_a_private_key_is_refused(tmp_path: Path, ca_pem: tuple[Path, Path]) -> None:
    both = tmp_path / "both.pem"
    both.write_bytes(ca_pem[0].read_bytes() + ca_pem[1].read_bytes())
    with pytest.raises(UsageError, match="contains a private key"):
        load_ca_cert(both)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"hello\n", "no PEM certificate found"),
        (b"\x30\x82\x01\x0a\xff\xfe", "not ASCII text"),
        (b"-----BEGIN CERTIFICATE-----\nTUlJQm9ndXM=\n-----END CERTIFICATE-----\n", "not a valid X.509"),
    ],
)
def test_bad_ca_cert_files(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.pem"
    path.write_bytes(content)
    with pytest.raises(UsageError, match=message) as info:
        load_ca_cert(path)
    assert str(path) in str(info.value)


def test_same_ca_twice_is_added_once(ca_pem: tuple[Path, Path], tmp_path: Path) -> None:
    copy = tmp_path / "corp-ca.pem"
    copy.write_bytes(ca_pem[0].read_bytes())
    assert len(load_ca_certs((ca_pem[0], copy))) == 1


def test_missing_ca_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read"):
        load_ca_cert(tmp_path / "absent.pem")


def test_wheels_are_checked_against_sha256sums(bundle: Path) -> None:
    house = bundle / "wheelhouse"
    (house / "six-1.17.0-py2.py3-none-any.whl").write_bytes(b"the fetched bytes")
    write_sha256sums(house)
    assert "wheelhouse/six-1.17.0-py2.py3-none-any.whl" in members(bundle)[0]
    (house / "six-1.17.0-py2.py3-none-any.whl").write_bytes(b"changed after fetch")
    with pytest.raises(BundleError, match=r"six-1.17.0-py2.py3-none-any.whl: sha256 .* differs from"):
        members(bundle)
    write_sha256sums(house)
    (house / "extra-1.0-py3-none-any.whl").write_bytes(b"dropped in by hand")
    with pytest.raises(BundleError, match=r"extra-1.0-py3-none-any.whl: not listed in"):
        members(bundle)
    (house / "extra-1.0-py3-none-any.whl").unlink()
    (house / "six-1.17.0-py2.py3-none-any.whl").unlink()
    with pytest.raises(
        BundleError, match=r"lists wheelhouse/six-1.17.0-py2.py3-none-any.whl, which is missing"
    ):
        members(bundle)
