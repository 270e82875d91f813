"""The bundle cache of ``envbuild build PROFILE``: a profile is rendered into a folder of its own.

A profile's cache folder is named after the sha256 of the bundle it renders to (every file, in
memory), so a changed profile, template or envbuild gives a new folder, and an unchanged one reuses
its fetched wheelhouse.  Nothing here imports torch or docker.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from envbuild.errors import UsageError
from envbuild.filestream import Content, content_size, feed
from envbuild.image.refs import slug
from envbuild.models import CheckResult


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/envbuild/bundles`` (``~/.cache`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "envbuild" / "bundles"


def render_command(result: CheckResult, targets: tuple[str, ...]) -> str:
    """The regenerate command recorded in a cached bundle (part of the cache key)."""
    return " ".join(["envbuild", "render", result.plan.profile.name, *(f"--target {t}" for t in targets)])


def bundle_digest(files: dict[str, Content], executable: frozenset[str]) -> str:
    """sha256 over every rendered file: its path, size, executable bit and bytes."""
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(f"{name}\0{content_size(files[name])}\0{name in executable}\0".encode())
        feed(digest, files[name])
    return digest.hexdigest()


def resolve_source(ref: str, targets: tuple[str, ...]) -> tuple[Path, CheckResult | None]:
    """``ref`` as a bundle folder (result None), or a profile checked and bound for the cache.

    Reads and checks only; nothing is written.
    """
    path = Path(ref)
    if path.is_dir():
        if targets:
            raise UsageError("--target applies to a profile, not to an already rendered bundle")
        return path, None
    from envbuild.plan import check
    from envbuild.profile import load_profile
    from envbuild.render import render_files

    profile = load_profile(ref)
    result = check(profile, targets=list(targets) or None)
    files, executable = render_files(result, render_command(result, targets), targets=targets or None)
    ids = "-".join(card.id for card in result.plan.targets) or "none"
    digest = bundle_digest(files, executable)
    return cache_root() / f"{profile.name}-{slug(ids)}-{digest[:16]}", result


def render_cached(bundle: Path, result: CheckResult, targets: tuple[str, ...], force: bool) -> None:
    """Render ``result`` into the cache folder ``bundle`` unless an earlier run already did."""
    from envbuild.render import render_bundle

    if not (bundle / "envbuild.lock.json").is_file():
        render_bundle(
            result, bundle, command=render_command(result, targets), force=force, targets=targets or None
        )
