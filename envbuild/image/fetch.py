"""``envbuild fetch``: fill a wheelhouse so the image builds without any package index.

The bundle is locked first when it is not (``envbuild lock``, with the same ``--index-url`` /
``--find-links``); then exactly the locked files are downloaded, each checked against its sha256
(:mod:`envbuild.image.wheelhouse`); a file the lock took from a local ``--find-links`` folder (recorded
by name and sha256, never by path) is copied from a folder given again with ``--find-links``.
``BUNDLE/tools/`` receives envbuild's own wheel plus its runtime dependencies, locked with uv for the
image and pinned with their sha256 in ``tools/requirements.txt`` (:mod:`envbuild.image.tools`), for the
validator's separate venv in the image.  Each folder gets a ``SHA256SUMS`` (sha256sum format) listing
what it holds.

Blender (:func:`envbuild.image.blender.fetch_blender`): with ``blender.source = "pypi"`` the bpy wheel is
a locked file like any other.  With ``"official"`` the Linux tarball and its checksum list
(``blender-X.Y.Z.sha256``) go into the wheelhouse too, the tarball checked against the catalog's pinned
sha256 for the release (where one is published), the sha256 the bundle's lock recorded at its first
fetch (recorded here when it has none), and the list beside it; the Dockerfile's blender stage then uses
them instead of downloading.  ``--blender-tarball PATH|URL`` takes a copy from elsewhere (a machine
without internet), checked the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envbuild import atomic
from envbuild.digest import sha256_file
from envbuild.errors import BuildError, BundleError
from envbuild.image.blender import BlenderFetched, fetch_blender, record_sha256
from envbuild.image.tools import fetch_tools
from envbuild.image.wheelhouse import download_locked
from envbuild.lock.target import Target
from envbuild.models import Finding, Lock, OsId, check_bundle

if TYPE_CHECKING:
    from envbuild.catalog import Catalog

__all__ = ["BlenderFetched", "FetchResult", "LockFailed", "fetch", "fetch_blender", "platform_tags"]

MIN_TOOL_PYTHON = (3, 10)  # envbuild's own Requires-Python


@dataclass(frozen=True)
class FetchResult:
    wheelhouse: Path
    wheels: tuple[str, ...]  # file names in the wheelhouse
    tools: tuple[str, ...]  # file names in BUNDLE/tools
    seconds: float
    locked: bool = False  # the bundle was locked by this fetch
    blender: BlenderFetched | None = None  # the official tarball, when the lock installs it


def platform_tags(os_id: OsId) -> list[str]:
    """Every x86_64 manylinux platform tag an image of ``os_id`` can install, newest first."""
    return list(Target("3", os_id).platform_tags)


def target_args(lock: Lock) -> list[str]:
    """pip options selecting wheels for the image instead of the host."""
    args = ["--only-binary=:all:", "--implementation", "cp", "--python-version", lock.python_version]
    for tag in Target.of(lock).platform_tags:
        args += ["--platform", tag]
    return args


def write_sha256sums(folder: Path, known: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Write ``folder/SHA256SUMS`` for every ``*.whl`` in it; return the wheel names.

    ``known`` (file name -> sha256) are digests already checked, e.g. by the locked download: those
    files are not read again."""
    known = known or {}
    names = sorted(p.name for p in folder.glob("*.whl") if p.is_file())
    lines = [f"{known.get(name) or sha256_file(folder / name)}  {name}\n" for name in names]
    try:
        atomic.write_text(folder / "SHA256SUMS", "".join(lines))
    except OSError as exc:  # a full disk: no temporary file left behind, the previous SHA256SUMS kept
        raise BuildError(
            f"fetch: cannot write {folder / 'SHA256SUMS'}: {exc.strerror or exc}; the files themselves "
            "are complete and checked. Free space and run `envbuild fetch` again"
        ) from None
    return tuple(names)


class LockFailed(BuildError):
    """``fetch`` locked an unresolved bundle first, and the resolution has error findings."""

    def __init__(self, findings: tuple[Finding, ...]) -> None:
        self.findings = findings
        lines = [f"  - {f.code}: {f.message}" for f in findings if f.severity == "error"]
        super().__init__(
            "the bundle is not locked, and locking it failed; nothing was fetched:\n" + "\n".join(lines)
        )


def fetch(
    bundle: Path,
    wheelhouse: Path | None = None,
    *,
    tools: bool = True,
    index_urls: tuple[str, ...] = (),
    find_links: tuple[str, ...] = (),
    say: Callable[[str], None] = lambda _: None,
    blender_tarball: str | None = None,
    catalog: Catalog | None = None,
) -> FetchResult:
    """Lock the bundle when needed, then download every locked file into ``wheelhouse``.

    ``wheelhouse`` defaults to ``BUNDLE/wheelhouse``.  ``index_urls`` and ``find_links`` apply to the
    lock (as for ``envbuild lock``); an already locked bundle is fetched from the URLs in its lock.
    """
    from envbuild.lock import lock_bundle

    lock = check_bundle(bundle)
    dest = wheelhouse if wheelhouse is not None else bundle / "wheelhouse"
    if dest.exists() and not dest.is_dir():
        raise BundleError(f"--wheelhouse {dest}: exists and is not a directory")
    started = time.monotonic()
    locked_now = False
    if not lock.resolved:
        say(f"{bundle} is not locked yet: locking it first (envbuild lock)")
        outcome = lock_bundle(bundle, index_urls=index_urls, find_links=find_links, say=say)
        if outcome.lock is None:
            raise LockFailed(outcome.findings)
        lock, locked_now = outcome.lock, True
    elif index_urls or find_links:
        say(
            "the bundle is already locked: its files are fetched from the URLs in its lock (a file it took "
            "from a local --find-links folder from the folders given, matched by name and sha256)"
        )
    dest.mkdir(parents=True, exist_ok=True)
    blender = fetch_blender(lock, dest, blender_tarball, say, catalog)
    if blender is not None and lock.blender_sha256 != blender.sha256:
        lock = record_sha256(bundle, lock, blender.sha256)
        say(f"recorded {blender.tarball}'s sha256 in {bundle}/envbuild.lock.json: later fetches must match")
    got = download_locked(lock, dest, say, find_links=find_links, index_urls=index_urls)
    say(f"{got.downloaded} file(s) downloaded, {got.kept} already in place with the locked sha256")
    wheels = write_sha256sums(dest, got.sha256)
    tool_names: tuple[str, ...] = ()
    if tools:
        version = tuple(int(p) for p in lock.python_version.split(".")[:2])
        if version < MIN_TOOL_PYTHON:
            raise BundleError(
                f"{bundle}/envbuild.lock.json: python_version {lock.python_version}: the in-image validator "
                f"needs Python >= {'.'.join(map(str, MIN_TOOL_PYTHON))}; fetch with --no-tools to skip it"
            )
        tools_dir = bundle / "tools"
        say(f"building envbuild's own wheel and fetching its locked dependencies into {tools_dir}")
        fetch_tools(lock, tools_dir, index_urls=index_urls, find_links=find_links, say=say)
        tool_names = write_sha256sums(tools_dir)
    return FetchResult(dest, wheels, tool_names, time.monotonic() - started, locked_now, blender)
