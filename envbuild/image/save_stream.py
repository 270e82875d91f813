"""The image's file system, read from the engine's ``docker save`` stream (legacy or OCI layout).

A record is computed from the engine's ``docker save`` stream, read once and never held whole: the
outer archive and each layer inside it are read as tar streams, each regular file hashed as it passes,
so memory stays at the size of the metadata (one entry per path) whatever the image's size.  The
layers are then applied in the manifest's order, whiteouts (``.wh.NAME``, ``.wh..wh..opq``) included,
giving the image's file system as a container sees it.

The Debian packages, Python distributions and the owner of each path (:class:`ImageFiles`) are derived
from the few small files kept whole on the way (dpkg's status and file lists, Python dist-info).
"""

from __future__ import annotations

import hashlib
import io
import json
import posixpath
import tarfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from email.parser import HeaderParser
from typing import IO, Any

from envbuild.errors import BuildError
from envbuild.image.record import AptPackage, FileEntry, ImageFiles, PyDist

CHUNK = 1 << 20
# Small files whose content the record needs (package lists, metadata); never more than this each.
KEEP_MAX = 8 << 20

_TYPES = {
    tarfile.REGTYPE: "file",
    tarfile.AREGTYPE: "file",
    tarfile.CONTTYPE: "file",
    tarfile.DIRTYPE: "dir",
    tarfile.SYMTYPE: "symlink",
    tarfile.LNKTYPE: "hardlink",
    tarfile.CHRTYPE: "char",
    tarfile.BLKTYPE: "block",
    tarfile.FIFOTYPE: "fifo",
}


class _ChunkReader(io.RawIOBase):
    """A file object over an iterator of byte chunks (the SDK's ``get_image`` stream)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self._buf = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._buf:
            try:
                self._buf = next(self._chunks)
            except StopIteration:
                return 0
        n = min(len(buffer), len(self._buf))
        buffer[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


@dataclass
class _Layer:
    entries: list[FileEntry] = field(default_factory=list)
    kept: dict[str, bytes] = field(default_factory=dict)  # content of the files the record reads
    whiteouts: list[str] = field(default_factory=list)  # paths removed
    opaque: list[str] = field(default_factory=list)  # directories whose lower content is hidden


def _keep(path: str) -> bool:
    """Files whose content the record reads: dpkg's status and file lists, Python dist-info."""
    if path == "/var/lib/dpkg/status" or (path.startswith("/var/lib/dpkg/info/") and path.endswith(".list")):
        return True
    parent = posixpath.basename(posixpath.dirname(path))
    return parent.endswith(".dist-info") and posixpath.basename(path) in {"METADATA", "INSTALLER", "RECORD"}


def _norm(name: str) -> str:
    path = posixpath.normpath("/" + name.lstrip("./").lstrip("/")) if name not in (".", "./") else "/"
    return "/" if path == "/." else path


def _read_layer(fileobj: IO[bytes]) -> _Layer:
    layer = _Layer()
    hashes: dict[str, str] = {}  # within this layer: hardlinks point at an earlier member
    with tarfile.open(fileobj=fileobj, mode="r|") as tar:
        for member in tar:
            path = _norm(member.name)
            base = posixpath.basename(path)
            if base.startswith(".wh."):
                parent = posixpath.dirname(path)
                if base == ".wh..wh..opq":
                    layer.opaque.append(parent)
                else:
                    layer.whiteouts.append(posixpath.join(parent, base[len(".wh.") :]))
                continue
            kind = _TYPES.get(member.type, "other")
            sha = None
            link = None
            if kind == "file":
                digest = hashlib.sha256()
                src = tar.extractfile(member)
                keep = _keep(path) and member.size <= KEEP_MAX
                parts: list[bytes] = []
                if src is not None:
                    while chunk := src.read(CHUNK):
                        digest.update(chunk)
                        if keep:
                            parts.append(chunk)
                sha = digest.hexdigest()
                hashes[path] = sha
                if keep:
                    layer.kept[path] = b"".join(parts)
            elif kind == "symlink":
                link = member.linkname
            elif kind == "hardlink":
                link = _norm(member.linkname)
                sha = hashes.get(link)
            layer.entries.append(
                FileEntry(path, kind, member.mode & 0o7777, member.uid, member.gid, member.size, sha, link)
            )
    return layer


def _is_tar(peeked: bytes) -> bool:
    return len(peeked) >= 262 and peeked[257:262] == b"ustar"


def read_saved_image(chunks: Iterable[bytes]) -> tuple[ImageFiles, list[str]]:
    """Flatten the image in a ``docker save`` stream (legacy or OCI layout) into its file system.

    Returns the files and the layer DiffIDs in order (the sha256 of each uncompressed layer tar)."""
    raw = io.BufferedReader(_ChunkReader(chunks), buffer_size=CHUNK)
    layers: dict[str, _Layer] = {}
    diff_of: dict[str, str] = {}
    aliases: dict[str, str] = {}
    manifest: list[dict[str, Any]] = []
    with tarfile.open(fileobj=raw, mode="r|") as outer:
        for member in outer:
            name = member.name.lstrip("./")
            if member.issym() or member.islnk():
                aliases[name] = posixpath.normpath(posixpath.join(posixpath.dirname(name), member.linkname))
                continue
            if not member.isfile():
                continue
            src = outer.extractfile(member)
            if src is None:
                continue
            if name == "manifest.json":
                manifest = json.loads(src.read())
                continue
            is_layer = name.endswith("/layer.tar") or name.endswith(".tar")
            if not is_layer and name.startswith("blobs/"):
                is_layer = _is_tar(src.peek(512)) if isinstance(src, io.BufferedReader) else False
            if not is_layer:
                continue
            hashing = _HashingReader(src)
            layers[name] = _read_layer(hashing)  # type: ignore[arg-type]
            hashing.drain()
            diff_of[name] = "sha256:" + hashing.digest.hexdigest()
    if not manifest:
        raise BuildError("the engine's image archive has no manifest.json")
    order: list[str] = []
    for name in manifest[0].get("Layers", []):
        name = name.lstrip("./")
        order.append(aliases.get(name, name))
    missing = [n for n in order if n not in layers]
    if missing:
        raise BuildError(f"the engine's image archive lacks layer(s) {', '.join(missing)}")
    files = _flatten(layers[n] for n in order)
    return files, [diff_of[n] for n in order]


class _HashingReader(io.RawIOBase):
    """Reads through ``src`` and hashes every byte (the layer's DiffID), whatever tarfile skips."""

    def __init__(self, src: IO[bytes]) -> None:
        self._src = src
        self.digest = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._src.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        self.digest.update(data)
        return n

    def drain(self) -> None:
        while chunk := self._src.read(CHUNK):
            self.digest.update(chunk)


def _under(path: str, folder: str) -> bool:
    return folder == "/" or path == folder or path.startswith(folder + "/")


def _flatten(layers: Iterable[_Layer]) -> ImageFiles:
    entries: dict[str, FileEntry] = {}
    kept: dict[str, bytes] = {}
    for layer in layers:
        for folder in layer.opaque:
            for path in [p for p in entries if _under(p, folder) and p != folder]:
                entries.pop(path)
                kept.pop(path, None)
        for gone in layer.whiteouts:
            removed = entries.pop(gone, None)
            kept.pop(gone, None)
            if removed is not None and removed.type != "dir":
                continue  # a file: nothing below it (pip's uninstalls whiteout thousands of these)
            for path in [p for p in entries if _under(p, gone)]:
                entries.pop(path)
                kept.pop(path, None)
        for entry in layer.entries:
            if entry.type == "hardlink" and entry.sha256 is None and entry.link in entries:
                target = entries[entry.link]
                entry = FileEntry(
                    entry.path,
                    entry.type,
                    entry.mode,
                    entry.uid,
                    entry.gid,
                    target.size,
                    target.sha256,
                    entry.link,
                )
            entries[entry.path] = entry
            if entry.path in layer.kept:
                kept[entry.path] = layer.kept[entry.path]
            else:
                kept.pop(entry.path, None)
    files = ImageFiles(entries=entries)
    _derive(files, kept)
    return files


def owner_key(kind: str, name: str, site: str = "") -> str:
    """``deb:NAME`` or ``py:NAME@SITE`` (a distribution can be installed in several environments)."""
    key = f"{kind}:{name.lower().replace('_', '-')}"
    return f"{key}@{site}" if site else key


def _derive(files: ImageFiles, kept: dict[str, bytes]) -> None:
    """Debian packages, Python distributions and who owns each path, from the kept contents."""
    status = kept.get("/var/lib/dpkg/status", b"").decode("utf-8", "replace")
    for para in status.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in para.splitlines() if ": " in line and not line.startswith(" ")
        )
        if "Package" in fields and "install ok installed" in fields.get("Status", ""):
            files.apt.append(
                AptPackage(fields["Package"], fields.get("Version", ""), fields.get("Architecture", ""))
            )
    files.apt.sort(key=lambda a: (a.name, a.arch))
    for path, data in kept.items():
        if path.endswith(".list"):
            pkg = posixpath.basename(path)[: -len(".list")].split(":")[0]
            for line in data.decode("utf-8", "replace").splitlines():
                if line and line != "/." and line in files.entries:
                    files.owners.setdefault(line, owner_key("deb", pkg))
    for path, data in kept.items():
        if not path.endswith("/METADATA"):
            continue
        folder = posixpath.dirname(path)
        meta = HeaderParser().parsestr(data.decode("utf-8", "replace"))
        name, version = meta.get("Name", ""), meta.get("Version", "")
        installer = kept.get(f"{folder}/INSTALLER", b"").decode("utf-8", "replace").strip()
        files.python.append(PyDist(name, version, installer, folder))
        site = posixpath.dirname(folder)
        for path_in in [p for p in files.entries if p.startswith(folder + "/")]:
            files.owners[path_in] = owner_key("py", name, site)  # its own metadata, listed or not
        for line in kept.get(f"{folder}/RECORD", b"").decode("utf-8", "replace").splitlines():
            rel = line.rsplit(",", 2)[0] if line.count(",") >= 2 else line
            target = posixpath.normpath(posixpath.join(site, rel))
            if target in files.entries:
                files.owners[target] = owner_key("py", name, site)
    files.python.sort(key=lambda d: (d.name.lower(), d.location))
