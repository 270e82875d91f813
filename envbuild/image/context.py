"""Assemble the build context (an uncompressed tar) from a bundle, deterministically.

The same inputs give the same bytes: entries sorted, owner root, fixed mtime, modes normalised to
0644/0755.  The bundle's ``.dockerignore`` is honoured (the daemon does not apply it to a custom
context), build logs are left out, an external ``--wheelhouse`` replaces ``BUNDLE/wheelhouse/``, and
extra CA certificates are added under ``certs/`` in the context only.

Before any byte is written, :func:`check_context` re-checks everything the context would hold against
the secret policy (:mod:`envbuild.secrets`): a bundle is a folder anyone can add files to after
``render`` (a private key in ``certs/``, an ``app/.env``, a token in ``tools/``), so a credential file
by name, or any file whose bytes hold a private key, token or URL credential, fails the build naming
the file.  Wheels in ``wheelhouse/`` and ``tools/`` are checked by name (their bytes are checked
against the lock's hashes instead), files over :data:`MAX_SCAN_BYTES` by name only.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from envbuild.errors import BuildError, BundleError
from envbuild.filestream import scan_file
from envbuild.image.certs import CaCert
from envbuild.models import check_bundle
from envbuild.secrets import file_name_reason

MAX_SCAN_BYTES = 64 << 20

FIXED_MTIME = 315532800  # 1980-01-01, like reproducible wheels
ALWAYS_EXCLUDED = ("build.log", "build-*.log", ".envbuild-*")


@dataclass(frozen=True)
class ContextInfo:
    files: int
    bytes: int  # size of the tar
    sha256: str  # of the tar: equal inputs give an equal digest
    wheels: int  # *.whl under wheelhouse/
    tools: int  # *.whl under tools/
    certs: tuple[str, ...]  # names under certs/ added from --ca-cert


def _ignore_patterns(bundle: Path) -> list[str]:
    path = bundle / ".dockerignore"
    patterns = list(ALWAYS_EXCLUDED)
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                patterns.append(line)
    return patterns


def _external(bundle: Path, wheelhouse: Path | None) -> Path | None:
    external = wheelhouse.resolve() if wheelhouse is not None else None
    if external is not None and external == (bundle / "wheelhouse").resolve():
        return None
    if external is not None and not external.is_dir():
        raise BundleError(f"--wheelhouse {wheelhouse}: not a directory (fill one with `envbuild fetch`)")
    return external


def _selected(bundle: Path, external: Path | None) -> Iterator[tuple[str, Path]]:
    """(name in the context, path) for every bundle entry that goes into the context, in order."""
    from docker.utils.build import PatternMatcher

    matcher = PatternMatcher(_ignore_patterns(bundle))
    for path in _walk(bundle):
        rel = path.relative_to(bundle).as_posix()
        if matcher.matches(rel):
            continue
        if external is not None and rel.startswith("wheelhouse/") and rel != "wheelhouse/.keep":
            continue
        yield rel, path


def _external_files(external: Path) -> Iterator[Path]:
    for path in sorted(external.iterdir(), key=lambda p: p.name):
        if path.is_file() and (path.suffix == ".whl" or path.name == "SHA256SUMS"):
            yield path


def _secret_reason(rel: str, path: Path) -> str | None:
    if path.is_symlink() or not path.is_file():
        return file_name_reason(path.name)
    wheel = rel.startswith(("wheelhouse/", "tools/")) and rel.endswith(".whl")
    if wheel or path.stat().st_size > MAX_SCAN_BYTES:
        return file_name_reason(path.name)
    return scan_file(path)  # in chunks: never a whole file in memory


def check_context(bundle: Path, wheelhouse: Path | None = None) -> None:
    """Refuse (:class:`BundleError`, exit 2) a secret anywhere in what the build context would hold.

    Called by ``envbuild build`` before the engine is contacted, and by :func:`write_context`."""
    bundle = bundle.resolve()
    external = _external(bundle, wheelhouse)
    entries = list(_selected(bundle, external))
    if external is not None:
        entries += [(f"wheelhouse/{p.name}", p) for p in _external_files(external)]
    for rel, path in entries:
        reason = _secret_reason(rel, path)
        if reason:
            raise BundleError(
                f"{path}: {reason}; secrets never go into a build context or an image: remove it from "
                "the bundle and provide it at run time (docker run -e / --env-file / -v)"
            )


def _walk(root: Path) -> Iterator[Path]:
    for path in sorted(root.iterdir(), key=lambda p: p.name):
        yield path
        if path.is_dir() and not path.is_symlink():
            yield from _walk(path)


def _info(name: str, *, kind: bytes, size: int = 0, mode: int = 0o644, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = size
    info.mode = mode
    info.mtime = FIXED_MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.linkname = link
    return info


class _Writer:
    def __init__(self, fileobj: IO[bytes]) -> None:
        self.tar = tarfile.open(  # noqa: SIM115 - closed by write_context
            fileobj=fileobj, mode="w|", format=tarfile.GNU_FORMAT
        )
        self.names: set[str] = set()
        self.files = 0

    def add_dir(self, name: str) -> None:
        if name not in self.names:
            self.names.add(name)
            self.tar.addfile(_info(name, kind=tarfile.DIRTYPE, mode=0o755))

    def add_bytes(self, name: str, data: bytes, mode: int = 0o644) -> None:
        self.names.add(name)
        self.files += 1
        self.tar.addfile(_info(name, kind=tarfile.REGTYPE, size=len(data), mode=mode), io.BytesIO(data))

    def add_file(self, name: str, path: Path) -> str:
        """Add ``path`` as ``name``; return the sha256 of the bytes that went in."""
        mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
        self.names.add(name)
        self.files += 1
        with path.open("rb") as handle:
            reader = _HashingReader(handle)
            self.tar.addfile(_info(name, kind=tarfile.REGTYPE, size=path.stat().st_size, mode=mode), reader)
        return reader.digest.hexdigest()

    def add_symlink(self, name: str, target: str) -> None:
        self.names.add(name)
        self.tar.addfile(_info(name, kind=tarfile.SYMTYPE, mode=0o777, link=target))


def write_context(
    bundle: Path,
    out: IO[bytes],
    *,
    wheelhouse: Path | None = None,
    ca_certs: tuple[CaCert, ...] = (),
    leave_out: Collection[str] = (),
    expect_sha256: Mapping[str, str] | None = None,
) -> ContextInfo:
    """Write the build context for ``bundle`` into ``out`` (a binary file object) and describe it.

    Refuses a bundle whose context would hold a secret (:func:`check_context`) before writing.
    ``leave_out``: context paths not written (kept wheels no build record vouches for);
    ``expect_sha256``: context path -> the sha256 its bytes must have as they are written (a kept
    wheel swapped after :func:`envbuild.image.built_cache.verify_built` checked it is refused)."""
    check_bundle(bundle)
    check_context(bundle, wheelhouse)
    bundle = bundle.resolve()
    external = _external(bundle, wheelhouse)
    hasher = _HashingWriter(out)
    writer = _Writer(hasher)  # type: ignore[arg-type]
    try:
        wheels = tools = 0
        added: dict[str, str] = {}  # "wheelhouse/x.whl" -> sha256 of what went into the context
        for rel, path in _selected(bundle, external):
            if rel in leave_out:
                continue
            if path.is_symlink():
                target = path.resolve()
                if not target.is_relative_to(bundle):
                    raise BundleError(
                        f"{path}: symbolic link points outside the bundle ({target}); refusing it"
                    )
                writer.add_symlink(rel, str(path.readlink()))
            elif path.is_dir():
                writer.add_dir(rel)
            elif path.is_file():
                digest = writer.add_file(rel, path)
                if rel.endswith(".whl"):
                    added[rel] = digest
                if expect_sha256 is not None and rel in expect_sha256 and digest != expect_sha256[rel]:
                    raise BuildError(
                        f"{path}: sha256 {digest} as it went into the build context, "
                        f"{expect_sha256[rel]} when it was checked: changed meanwhile; nothing was built"
                    )
                wheels += rel.startswith("wheelhouse/") and rel.endswith(".whl")
                tools += rel.startswith("tools/") and rel.endswith(".whl")
            else:
                raise BundleError(f"{path}: not a regular file or directory; remove it from the bundle")
        if external is not None:
            writer.add_dir("wheelhouse")
            for path in _external_files(external):
                digest = writer.add_file(f"wheelhouse/{path.name}", path)
                if path.suffix == ".whl":
                    added[f"wheelhouse/{path.name}"] = digest
                wheels += path.suffix == ".whl"
        _check_sums(added, {"wheelhouse": external or bundle / "wheelhouse", "tools": bundle / "tools"})
        if ca_certs:
            writer.add_dir("certs")
            for cert in ca_certs:
                writer.add_bytes(f"certs/{cert.name}", cert.pem)
    finally:
        writer.tar.close()  # also on a refusal: the partial context is discarded by the caller
    return ContextInfo(
        files=writer.files,
        bytes=hasher.size,
        sha256=hasher.digest.hexdigest(),
        wheels=wheels,
        tools=tools,
        certs=tuple(c.name for c in ca_certs),
    )


def _check_sums(added: dict[str, str], folders: dict[str, Path]) -> None:
    """Wheels must match the ``SHA256SUMS`` that ``envbuild fetch`` wrote, when there is one."""
    for prefix, folder in folders.items():
        sums_path = folder / "SHA256SUMS"
        if not sums_path.is_file():
            continue
        listed: dict[str, str] = {}
        for number, line in enumerate(sums_path.read_text(encoding="utf-8").splitlines(), start=1):
            digest, sep, name = line.partition("  ")
            if not sep or len(digest) != 64:
                raise BundleError(f"{sums_path}:{number}: not a sha256sum line; re-run `envbuild fetch`")
            listed[f"{prefix}/{name}"] = digest
        for name, digest in sorted(added.items()):
            if not name.startswith(prefix + "/"):
                continue
            if name not in listed:
                raise BundleError(
                    f"{folder}/{name.split('/', 1)[1]}: not listed in {sums_path}; re-run `envbuild fetch`"
                )
            if listed[name] != digest:
                raise BundleError(
                    f"{folder}/{name.split('/', 1)[1]}: sha256 {digest} differs from {sums_path} "
                    f"({listed[name]}); the wheel changed since `envbuild fetch`"
                )
        missing = sorted(set(listed) - set(added))
        if missing:
            raise BundleError(
                f"{sums_path}: lists {', '.join(missing)}, which is missing; re-run `envbuild fetch`"
            )


class _HashingReader:
    def __init__(self, inner: IO[bytes]) -> None:
        self.inner = inner
        self.digest = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self.inner.read(size)
        self.digest.update(data)
        return data


class _HashingWriter:
    """A write-only file object that hashes and counts what passes through."""

    def __init__(self, inner: IO[bytes]) -> None:
        self.inner = inner
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        self.size += len(data)
        return self.inner.write(data)

    def flush(self) -> None:
        self.inner.flush()
