"""Write a resolution back into the bundle: ``requirements-rebuild.txt`` in hash mode and the lock.

Both files are rendered in memory, then written to temporary files beside them and renamed, the lock
last; a failure leaves both as they were.  Nothing in them depends on the time or the host (apart from
a ``--find-links`` folder the user named, recorded as provenance), so locking twice against the same
indexes gives identical bytes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from envbuild import __version__
from envbuild.lock.resolve import Resolved
from envbuild.models import Lock, LockedDistribution
from envbuild.render.lockfile import lock_json
from envbuild.render.quote import check_plain, comment
from envbuild.typed import replace

REQUIREMENTS = "requirements-rebuild.txt"
LOCK = "envbuild.lock.json"


def _via(dist: LockedDistribution) -> list[str]:
    return [*dist.declared_by, *dist.required_by]


def generate(lock: Lock, resolved: Resolved) -> Iterator[str]:
    res = resolved.resolution
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
    if res.find_links:
        yield "# Files found there are not on the indexes below: `envbuild fetch` puts them in wheelhouse/."
    yield (
        f"# {len(resolved.distributions)} distributions, each pinned to the sha256 of its file(s) for this "
        "target: pip installs"
    )
    yield "# them in hash-checking mode; install with --no-deps, nothing is left to resolve."
    yield ""
    yield "--require-hashes"
    yield "--only-binary :all:"
    for i, url in enumerate(res.index_urls):
        yield f"{'--index-url' if i == 0 else '--extra-index-url'} {check_plain(url, 'index url')}"
    for dist in resolved.distributions:
        yield ""
        yield f"{dist.spec} \\"
        hashes = dist.hashes
        for j, value in enumerate(hashes):
            yield f"    --hash={value}" + (" \\" if j < len(hashes) - 1 else "")
        via = _via(dist)
        if via:
            yield f"    # via {comment(', '.join(via), 'via')}"


def render_requirements(lock: Lock, resolved: Resolved) -> str:
    return "\n".join(generate(lock, resolved)) + "\n"


def locked(lock: Lock, resolved: Resolved) -> Lock:
    return replace(lock, resolved=True, resolution=resolved.resolution, distributions=resolved.distributions)


def write_locked(bundle: Path, lock: Lock, resolved: Resolved) -> Lock:
    """Write both files atomically (temporary files renamed into place, the lock last)."""
    new_lock = locked(lock, resolved)
    files = {
        REQUIREMENTS: render_requirements(lock, resolved).encode("utf-8"),
        LOCK: lock_json(new_lock).encode("utf-8"),
    }
    parts: dict[str, Path] = {}
    try:
        for name, data in files.items():
            part = bundle / f".{name}.part"
            part.write_bytes(data)
            part.chmod(0o644)
            parts[name] = part
        for name in (REQUIREMENTS, LOCK):
            os.replace(parts[name], bundle / name)
    finally:
        for part in parts.values():
            part.unlink(missing_ok=True)
    return new_lock
