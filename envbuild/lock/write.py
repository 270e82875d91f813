"""Write a resolution back into the bundle: ``requirements-rebuild.txt`` in hash mode and the lock.

Both files are rendered in memory, then written to temporary files beside them and renamed, the lock
last; a failure leaves both as they were.  Nothing in them depends on the time or the host, so locking
twice against the same indexes gives identical bytes: a local ``--find-links`` folder is recorded by the
files taken from it (name and sha256), never by its path, and credentials in an index URL as ``${VAR}``
references (:mod:`envbuild.lock.urls`), never as values.

``requirements-rebuild.txt`` installs on a clean pip (``PIP_CONFIG_FILE=/dev/null``): its header says
which route applies (:func:`envbuild.lock.urls.install_route`): the indexes it names, when every locked
file is on one, else the bundle's wheelhouse (``--no-index --find-links wheelhouse``, after
``envbuild fetch``).  The README's provider route says the same
(:func:`envbuild.render.readme.provider_route`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from envbuild import __version__, atomic
from envbuild.lock.resolve import Resolved
from envbuild.lock.source_files import installed, source_files
from envbuild.lock.urls import index_options, install_route
from envbuild.models import Lock, LockedDistribution, lock_json
from envbuild.render.quote import check_file, check_generated, comment

REQUIREMENTS = "requirements-rebuild.txt"
LOCK = "envbuild.lock.json"
README = "README.md"


def _via(dist: LockedDistribution) -> list[str]:
    return [*dist.declared_by, *dist.required_by]


def route_lines(lock: Lock) -> Iterator[str]:
    """The header's install route: which one applies, and the variables it needs."""
    route = install_route(lock)
    if route.wheelhouse:
        yield (
            f"# Install route: the bundle's wheelhouse. {len(route.local)} distribution(s) came from a local "
            "--find-links folder,"
        )
        yield "# recorded here by file name and sha256, never by path, and are on no index above:"
        for spec in route.local:
            yield f"#   {comment(spec, 'spec')}"
        yield "# `envbuild fetch BUNDLE --find-links DIR` puts them (and every locked file) in wheelhouse/;"
        yield "# then: pip install --no-deps --no-index --find-links wheelhouse -r requirements-rebuild.txt"
    else:
        yield "# Install route: the indexes below hold every locked file; a clean pip (no pip.conf) runs"
        yield "#   pip install --no-deps -r requirements-rebuild.txt"
        yield "# or offline, after `envbuild fetch BUNDLE`: add --no-index --find-links wheelhouse."
    if route.variables:
        yield (
            f"# Credentials are not written here: set {', '.join(route.variables)} in the environment; pip "
            "expands"
        )
        yield "# each ${VAR} when it reads this file (percent-encode @ : / in the values, as in any URL)."


def generate(lock: Lock, resolved: Resolved) -> Iterator[str]:
    res = resolved.resolution
    new_lock = locked(lock, resolved)
    yield f"# requirements-rebuild.txt, locked by envbuild {__version__} with {res.resolver}. Do not edit:"
    yield "#   regenerate with `envbuild render ...` then `envbuild lock BUNDLE` (see the bundle README)."
    yield f"# profile: {comment(lock.profile_name, 'name')}, sha256 {lock.profile_sha256}"
    yield (
        f"# target: CPython {res.python_version} ({res.implementation}), {res.platform}; "
        f"wheel platform tags {res.wheel_tags[0]} ... {res.wheel_tags[-1]}"
    )
    for i, url in enumerate(res.index_urls):
        yield f"# {'index' if i == 0 else 'extra index'} ({res.indexes_from}): {comment(url, 'index url')}"
    for link in res.find_links:
        yield f"# find-links: {comment(link, 'find-links')}"
    if res.find_links_folders:
        yield f"# find-links: {res.find_links_folders} local folder(s), not recorded (their files are, below)"
    yield (
        f"# {len(installed(resolved.distributions))} distributions, each pinned to the sha256 of its file(s) "
        "for this target: pip installs"
    )
    yield "# them in hash-checking mode; install with --no-deps, nothing is left to resolve."
    yield from route_lines(new_lock)
    yield ""
    yield "--require-hashes"
    yield "--only-binary :all:"
    yield from index_options(res)
    for dist in installed(resolved.distributions):  # sdists and build-only: lock/source_files.py
        yield ""
        yield f"{dist.spec} \\"
        hashes = dist.hashes
        for j, value in enumerate(hashes):
            yield f"    --hash={value}" + (" \\" if j < len(hashes) - 1 else "")
        via = _via(dist)
        if via:
            yield f"    # via {comment(', '.join(via), 'via')}"


def render_requirements(lock: Lock, resolved: Resolved) -> str:
    lines = list(generate(lock, resolved))
    return check_file(REQUIREMENTS, "\n".join(lines) + "\n", lines)


def locked(lock: Lock, resolved: Resolved) -> Lock:
    return replace(lock, resolved=True, resolution=resolved.resolution, distributions=resolved.distributions)


def _with_route(bundle: Path, readme: bytes | None, lock: Lock) -> bytes | None:
    """The README (``readme``, else the bundle's) with its provider route for the resolved ``lock``."""
    from envbuild.render.readme import with_provider_route

    if readme is None:
        path = bundle / README
        if not path.is_file():
            return None
        readme = path.read_bytes()
    text = with_provider_route(readme.decode("utf-8"), lock.python_version, install_route(lock))
    return None if text is None else text.encode("utf-8")


def write_locked(bundle: Path, lock: Lock, resolved: Resolved, extra: dict[str, bytes] | None = None) -> Lock:
    """Write both files atomically (temporary files renamed into place, the lock last).

    ``extra``: other files of the bundle that follow the plan derived from the resolved set
    (Dockerfile, README.md), written the same way before the lock."""
    new_lock = locked(lock, resolved)
    files = {
        **(extra or {}),
        REQUIREMENTS: render_requirements(lock, resolved).encode("utf-8"),
        **source_files(new_lock),
        LOCK: lock_json(new_lock).encode("utf-8"),
    }
    readme = _with_route(bundle, files.get(README), new_lock)
    if readme is not None:  # the README's provider route says which route applies now
        files = {README: readme, **{name: data for name, data in files.items() if name != README}}
    check_generated(files)
    # every file written and fsynced first, then each renamed: the lock last (dicts keep insertion order)
    atomic.write_many({bundle / name: data for name, data in files.items()}, mode=0o644)
    return new_lock
