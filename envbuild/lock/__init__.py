"""``envbuild lock``: resolve a rendered bundle's full requirement set and pin it with hashes.

The stage between render and build::

    render (declared requirements)  ->  lock (every distribution, its target files, sha256)  ->  fetch/build

Public API: :func:`lock_bundle` (resolve and rewrite the bundle's requirements-rebuild.txt and
envbuild.lock.json), :func:`resolve_plan` (the same resolution before ordering, writing nothing).
Nothing here imports torch or docker.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from envbuild.lock.resolve import Resolved, ResolveError, resolve
from envbuild.models import Lock, Plan

__all__ = ["LockOutcome", "ResolveError", "Resolved", "lock_bundle", "resolve_plan"]


@dataclass(frozen=True)
class LockOutcome:
    bundle: Path
    resolved: Resolved
    lock: Lock | None  # the lock written; None when the resolution had errors (nothing written)
    seconds: float


def lock_bundle(
    bundle: Path,
    *,
    index_urls: Iterable[str] = (),
    find_links: Iterable[str] = (),
    say: Callable[[str], None] = lambda _: None,
) -> LockOutcome:
    """Resolve ``bundle`` and, when every finding allows it, rewrite its requirements and lock."""
    from envbuild.image.context import check_bundle
    from envbuild.lock.write import write_locked

    started = time.monotonic()
    lock = check_bundle(bundle)
    say(f"resolving {bundle} for CPython {lock.python_version} on {lock.os}")
    resolved = resolve(lock, bundle=bundle, index_urls=index_urls, find_links=find_links)
    if not resolved.ok:
        return LockOutcome(bundle, resolved, None, time.monotonic() - started)
    written = write_locked(bundle, lock, resolved)
    return LockOutcome(bundle, resolved, written, time.monotonic() - started)


def resolve_plan(plan: Plan, *, index_urls: Iterable[str] = (), find_links: Iterable[str] = ()) -> Resolved:
    """Resolve a checked plan as `envbuild lock` would resolve its bundle; nothing is written."""
    from envbuild.render.lockfile import make_lock

    return resolve(make_lock(plan), bundle=None, index_urls=index_urls, find_links=find_links)
