"""Which releases of a project the indexes serve with a file the target can install.

Read from the same index pages the resolver reads (:mod:`envbuild.simpleindex`: PEP 691 JSON or PEP 503
HTML) and from ``--find-links`` folders.  A release counts when one of its files installs on the target:
a wheel whose tags (:func:`packaging.utils.parse_wheel_filename`) meet the target's
(:attr:`envbuild.lock.target.Target.tags`: cp312, abi3 and ``py3``, manylinux_2_39 down to manylinux1),
or, for a project in ``[python] build_from_source``, an sdist (and only an sdist).  Yanked files, files whose
``Requires-Python`` excludes the target's Python and (unless the lock allows them) pre-releases do not
count.  An index that cannot be read contributes nothing: these answers explain a resolution, they never
decide one.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from envbuild.lock.target import Target
from envbuild.lock.uv import Sources
from envbuild.net import open_url
from envbuild.simpleindex import ACCEPT, IndexFile, read_page


@dataclass(frozen=True)
class Served:
    """What the indexes serve of one project: every release, and those installable on the target."""

    releases: tuple[Version, ...]  # every release with a file (any platform), ascending
    installable: tuple[Version, ...]  # those with a file the target installs, ascending

    def newest(self, allowed: SpecifierSet | None = None) -> Version | None:
        """The newest installable release that ``allowed`` (the profile's own specifiers) admits."""
        found = [v for v in self.installable if allowed is None or allowed.contains(v, prereleases=True)]
        return found[-1] if found else None


def _index_files(index: str, name: str) -> list[IndexFile]:
    page = index.rstrip("/") + f"/{name}/"
    try:
        with open_url(page, accept=ACCEPT, timeout=20) as response:
            body = response.read(16 << 20)
            headers = getattr(response, "headers", None)
            kind = str(headers.get("Content-Type", "")) if headers is not None else ""
        return read_page(body, kind, page)
    except (OSError, ValueError):
        return []


def _folder_files(link: str) -> list[IndexFile]:
    parts = urlsplit(link)
    if parts.scheme not in ("", "file"):
        return []  # a find-links page: the resolver reads it; these answers skip it
    folder = Path(unquote(parts.path) if parts.scheme else link)
    try:
        return [IndexFile(filename=n, url="") for n in sorted(os.listdir(folder))]
    except OSError:
        return []


def _release(filename: str, name: str, target: Target, sdist_only: bool) -> tuple[Version, bool] | None:
    """(its version, whether the target installs it), or None when it is not a file of ``name``.

    ``sdist_only``: the project is built from source (uv's ``--no-binary NAME``), so only its sdists
    install."""
    if filename.endswith(".whl"):
        try:
            project, version, _build, tags = parse_wheel_filename(filename)
        except InvalidWheelFilename:
            return None
        if project != name:
            return None
        return version, not sdist_only and bool(set(tags) & target.tags)
    try:
        project_s, version = parse_sdist_filename(filename)
    except InvalidSdistFilename:
        return None
    return (version, sdist_only) if canonicalize_name(project_s) == name else None


def _python_ok(requires: str | None, target: Target) -> bool:
    if not requires:
        return True
    try:
        return SpecifierSet(requires).contains(Version(target.python_version), prereleases=True)
    except InvalidSpecifier:
        return True


@functools.lru_cache(maxsize=256)
def served(name: str, sources: Sources, target: Target, from_source: bool = False) -> Served:
    """The releases of ``name`` on ``sources`` (see the module doc); ``from_source``: the project is in
    ``[python] build_from_source``, so its sdists count and its wheels do not (as the resolver is told)."""
    key = str(canonicalize_name(name))
    files = [f for index in sources.index_urls for f in _index_files(index, key)]
    files += [f for link in sources.find_links for f in _folder_files(link)]
    every: set[Version] = set()
    usable: set[Version] = set()
    for file in files:
        found = _release(file.filename, key, target, from_source)
        if found is None:
            continue
        version, installs = Version(found[0].public), found[1]  # a local build is its release
        if version.is_prerelease and not sources.prerelease:
            continue
        every.add(version)
        if installs and not file.yanked and _python_ok(file.requires_python, target):
            usable.add(version)
    return Served(tuple(sorted(every)), tuple(sorted(usable)))


def has_compatible_wheel(name: str, version: Version, sources: Sources, target: Target) -> bool:
    """A wheel of ``name`` ``version`` installs on the target (abi3 and older manylinux tags count)."""
    return version in served(name, sources, target, False).installable


def series(version: Version) -> tuple[int, int]:
    """A release's series: its (major, minor)."""
    release = (*version.release, 0)
    return release[0], release[1]


def series_behind(locked: Version, newest: Version, releases: tuple[Version, ...]) -> int:
    """How many series the served releases hold after ``locked``'s, up to ``newest``'s.

    A series is a (major, minor) pair, ordered as versions are; only series the index serves count, so
    numpy 1.26 -> 2.0 is one series behind, vllm 0.33 -> 0.34 one, vllm 0.2 -> 0.34 many."""
    have = {series(v) for v in releases} | {series(newest)}
    return sum(1 for s in have if series(locked) < s <= series(newest))


__all__ = ["Served", "has_compatible_wheel", "series", "series_behind", "served"]
