"""Compare two images on content: package sets and file manifests, each difference attributed.

``envbuild image diff A B`` takes image tags (recorded on the fly from the engine) or build records.
Differences fall in three classes:

- ``package``: a Debian package or Python distribution added, removed or at another version; the paths
  it owns are reported with it, not one by one;
- ``content``: a path added or removed, or with other bytes, type, size or link target;
- ``metadata``: same content, other mode, uid or gid.

Timestamps are never compared (the record has none).  A short list of paths is noise by nature and is
left out; each entry says why (:data:`NOISE`).
"""

from __future__ import annotations

import fnmatch
import posixpath
from dataclasses import dataclass, field, replace
from typing import Any

from envbuild.image.record import FileEntry, ImageFiles
from envbuild.image.save_stream import owner_key

# (pattern, reason): paths whose content changes from build to build without any input changing.
NOISE: tuple[tuple[str, str], ...] = (
    ("/var/cache/ldconfig/aux-cache", "ldconfig's auxiliary cache stores the files' mtimes and inodes"),
    ("/etc/machine-id", "systemd writes a random id per installation"),
    ("/var/lib/dbus/machine-id", "a random id per installation (dbus)"),
    ("/var/log/*", "apt, dpkg and installer logs carry the time of the build"),
    ("/var/lib/apt/lists/*", "package index snapshots: they change daily (and are removed by our images)"),
    ("/var/cache/apt/*", "apt's binary caches of the package indexes"),
    ("/var/cache/debconf/*-old", "debconf's backups of its databases, with run-dependent content"),
    ("/var/lib/dpkg/*-old", "dpkg's backups of status and available, from the previous run"),
    ("/tmp/*", "scratch space of the build steps"),
    ("/root/.cache/*", "pip's and uv's download caches (we install with --no-cache-dir)"),
)


def noise_pattern(path: str) -> str | None:
    """The :data:`NOISE` pattern ``path`` falls under, or None."""
    return next((pattern for pattern, _ in NOISE if fnmatch.fnmatchcase(path, pattern)), None)


@dataclass(frozen=True)
class PackageChange:
    kind: str  # "deb" or "py"
    name: str
    before: str | None  # version, None when added
    after: str | None  # version, None when removed
    paths: int  # differing paths owned by it


@dataclass(frozen=True)
class PathChange:
    path: str
    klass: str  # "content" or "metadata"
    what: str  # "added", "removed", "sha256", "type", "link", "size", "mode", "uid", "gid"
    owner: str | None  # "deb:NAME" / "py:NAME" / None
    before: str | None = None
    after: str | None = None


@dataclass
class Diff:
    a: str
    b: str
    packages: list[PackageChange] = field(default_factory=list)
    paths: list[PathChange] = field(default_factory=list)
    noise: dict[str, int] = field(default_factory=dict)  # pattern -> differing paths left out

    @property
    def identical(self) -> bool:
        return not self.packages and not self.paths

    def counts(self) -> dict[str, int]:
        return {
            "package": len(self.packages),
            "content": sum(p.klass == "content" for p in self.paths),
            "metadata": sum(p.klass == "metadata" for p in self.paths),
        }

    def as_json(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "identical": self.identical,
            "counts": self.counts(),
            "packages": [vars(p) for p in self.packages],
            "paths": [{**vars(p), "class": p.klass} for p in self.paths],
            "noise": [
                {"pattern": pattern, "reason": reason, "paths": self.noise[pattern]}
                for pattern, reason in NOISE
                if pattern in self.noise
            ],
        }


def _versions(files: ImageFiles) -> dict[str, tuple[str, str]]:
    """Owner key -> (display name, version) for every package in the image."""
    out: dict[str, tuple[str, str]] = {}
    for a in files.apt:
        key = owner_key("deb", a.name)
        shown = out.get(key, (a.name, ""))[1]
        out[key] = (a.name, f"{shown}, {a.version}" if shown else a.version)
    for d in files.python:
        site = posixpath.dirname(d.location)
        out[owner_key("py", d.name, site)] = (f"{d.name} in {site}", d.version)
    return out


def _describe(a: FileEntry, b: FileEntry) -> tuple[str, str, str, str]:
    """(class, what, before, after) for two entries at one path that differ."""
    if a.type != b.type:
        return "content", "type", a.type, b.type
    if a.link != b.link:
        return "content", "link", str(a.link), str(b.link)
    if a.sha256 != b.sha256:
        return "content", "sha256", str(a.sha256), str(b.sha256)
    if a.size != b.size:
        return "content", "size", str(a.size), str(b.size)
    if a.mode != b.mode:
        return "metadata", "mode", oct(a.mode), oct(b.mode)
    if a.uid != b.uid:
        return "metadata", "uid", str(a.uid), str(b.uid)
    return "metadata", "gid", str(a.gid), str(b.gid)


def diff_files(a: ImageFiles, b: ImageFiles, *, a_name: str = "A", b_name: str = "B") -> Diff:
    result = Diff(a_name, b_name)
    va, vb = _versions(a), _versions(b)
    changed: dict[str, PackageChange] = {}
    for key in sorted(set(va) | set(vb)):
        pa, pb = va.get(key), vb.get(key)
        if (pa and pa[1]) != (pb and pb[1]):
            name = (pb or pa or ("", ""))[0]
            changed[key] = PackageChange(
                key.split(":", 1)[0], name, pa[1] if pa else None, pb[1] if pb else None, 0
            )
    owned: dict[str, int] = {}
    for path in sorted(set(a.entries) | set(b.entries)):
        ea, eb = a.entries.get(path), b.entries.get(path)
        if ea is not None and eb is not None and ea == eb:
            continue
        pattern = noise_pattern(path)
        if pattern is not None:
            result.noise[pattern] = result.noise.get(pattern, 0) + 1
            continue
        owner = b.owners.get(path) or a.owners.get(path)
        if owner is not None and owner in changed:
            owned[owner] = owned.get(owner, 0) + 1
            continue
        if ea is None:
            assert eb is not None
            result.paths.append(PathChange(path, "content", "added", owner, None, eb.sha256 or eb.type))
        elif eb is None:
            result.paths.append(PathChange(path, "content", "removed", owner, ea.sha256 or ea.type, None))
        else:
            klass, what, before, after = _describe(ea, eb)
            result.paths.append(PathChange(path, klass, what, owner, before, after))
    result.packages = [replace(change, paths=owned.get(key, 0)) for key, change in sorted(changed.items())]
    return result


def format_diff(diff: Diff, *, limit: int = 50) -> list[str]:
    """Human lines: a verdict, then package changes, then paths (at most ``limit``), then the noise."""
    counts = diff.counts()
    if diff.identical:
        lines = [f"identical on content: {diff.a} and {diff.b}"]
    else:
        lines = [
            f"different: {diff.a} and {diff.b}: {counts['package']} package(s), "
            f"{counts['content']} path(s) by content, {counts['metadata']} by metadata only"
        ]
    for p in diff.packages:
        owned = f" ({p.paths} differing path(s))" if p.paths else ""
        lines.append(
            f"  package {p.kind} {p.name}: {p.before or '(absent)'} -> {p.after or '(absent)'}{owned}"
        )
    for change in diff.paths[:limit]:
        owner = f" [{change.owner}]" if change.owner else ""
        if change.what in ("added", "removed"):
            lines.append(f"  {change.klass:8} {change.what:7} {change.path}{owner}")
        else:
            lines.append(
                f"  {change.klass:8} {change.what:7} {change.path}{owner}: {change.before} -> {change.after}"
            )
    if len(diff.paths) > limit:
        lines.append(f"  ... and {len(diff.paths) - limit} more path(s) (--json lists them all)")
    for pattern, reason in NOISE:
        if pattern in diff.noise:
            lines.append(f"  noise, not compared: {diff.noise[pattern]} path(s) under {pattern} ({reason})")
    return lines
