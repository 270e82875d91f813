"""Read the resolver's PEP 751 ``pylock.toml`` into locked distributions for the lock's target.

A distribution's files are the wheels that install on the target.  A name of ``[python]
build_from_source`` is locked as its sdist instead (``role = "source"``), built in the builder stage.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, cast
from urllib.parse import unquote, urlsplit

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from envbuild.lock.target import Target
from envbuild.lock.urls import lock_file_url
from envbuild.lock.uv import Annotation
from envbuild.models import LockedDistribution, LockedFile, RequirementLine


def _file_name(url: str, entry: dict[str, Any]) -> str:
    name = entry.get("name")
    if isinstance(name, str) and name:
        return name
    return unquote(urlsplit(url).path.rsplit("/", 1)[-1])


def _file(entry: dict[str, Any]) -> LockedFile | None:
    url = str(entry.get("url") or entry.get("path") or "")
    hashes = entry.get("hashes") or {}
    sha = hashes.get("sha256") if isinstance(hashes, dict) else None
    if not url or not isinstance(sha, str):
        return None
    size = entry.get("size")
    return LockedFile(
        filename=_file_name(url, entry),
        url=lock_file_url(url),
        sha256=sha,
        size=size if isinstance(size, int) else None,
    )


def installable(filename: str, target: Target) -> bool:
    try:
        tags = parse_wheel_filename(filename)[3]
    except InvalidWheelFilename:
        return False
    return bool(set(tags) & target.tags)


def sdist_url(package: dict[str, Any]) -> str | None:
    """The URL the resolver read a package's sdist from (credentials kept: to read it, never to record)."""
    entry = package.get("sdist")
    if not isinstance(entry, dict):
        return None
    url = entry.get("url") or entry.get("path")
    return str(url) if url else None


def distributions_from(
    pylock: dict[str, Any],
    annotations: dict[str, Annotation],
    origins: dict[str, list[RequirementLine]],
    target: Target,
    from_source: Collection[str] = (),
) -> tuple[list[LockedDistribution], list[str]]:
    """(every distribution with its target files, names that have only a source distribution).

    A name in ``from_source`` is locked by its sdist, with ``role = "source"``."""
    dists: list[LockedDistribution] = []
    source_only: list[str] = []
    for package in cast(list[dict[str, Any]], pylock.get("packages", [])):
        name = str(canonicalize_name(str(package["name"])))
        version = Version(str(package["version"]))
        if name in from_source:
            sdist = package.get("sdist")
            found = _file(sdist) if isinstance(sdist, dict) else None
            files = [found] if found is not None else []
        else:
            entries = list(package.get("wheels") or [])
            archive = package.get("archive")
            if isinstance(archive, dict):
                entries.append(archive)
            files = [
                f for f in (_file(e) for e in entries) if f is not None and installable(f.filename, target)
            ]
        if not files:
            source_only.append(name)
            continue
        note = annotations.get(name)
        parents = tuple(
            sorted(str(canonicalize_name(v)) for v in (note.via if note else ()) if not v.startswith("-"))
        )
        dists.append(
            LockedDistribution(
                name=name,
                version=version.public,
                local=version.local,
                files=tuple(sorted(files, key=lambda f: f.filename)),
                declared_by=tuple(line.origin for line in origins.get(name, [])),
                required_by=parents,
                index=note.index if note else None,
                role="source" if name in from_source else "install",
            )
        )
    dists.sort(key=lambda d: d.name)
    return dists, source_only
