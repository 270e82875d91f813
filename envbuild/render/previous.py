"""The previous bundle in ``out``: whether a folder is one (and whether ``envbuild lock`` resolved its lock),
refusing any other non-empty folder or a file, and what a re-render keeps of it (:func:`plan_keep`)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from envbuild.errors import BundleError
from envbuild.models import LOCK_FORMAT

KEEP_DIRS = ("app", "certs", "tools", "wheelhouse")
# Folders render rewrites whole on every render: nothing in them is kept.
OWNED_DIRS = ("app", "constraints")
# Files only some renders write (render --bake): dropped by a render that does not write them, so a
# stale one never describes another render.
OPTIONAL_FILES = ("docker-bake.hcl",)
# What marks a folder as a previous envbuild bundle (safe to render into).
BUNDLE_MARKERS = ("Dockerfile", "envbuild.lock.json")


def is_bundle(path: Path) -> bool:
    if not all((path / marker).is_file() for marker in BUNDLE_MARKERS):
        return False
    try:
        head = (path / "envbuild.lock.json").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return f'"format": "{LOCK_FORMAT}"' in head


def was_resolved(bundle: Path) -> bool:
    """Whether ``bundle`` holds a lock that ``envbuild lock`` resolved (``"resolved": true``).

    Re-rendering replaces that lock and requirements-rebuild.txt with an unresolved render.
    """
    if not is_bundle(bundle):
        return False
    try:
        data = json.loads((bundle / "envbuild.lock.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(data, dict) and data.get("resolved") is True


def prepare_out(out: Path) -> None:
    """Refuse an ``out`` that is a file, or a non-empty folder that is not an envbuild bundle."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise BundleError(f"{out}: exists and is not a folder; choose another --out")
    if out.is_dir() and any(out.iterdir()) and not is_bundle(out):
        raise BundleError(
            f"{out}: folder is not empty and is not an envbuild bundle (no Dockerfile + "
            f"envbuild.lock.json of format {LOCK_FORMAT}); refusing to overwrite it. Choose another --out "
            "or empty it first"
        )


def real_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


@dataclass
class KeepPlan:
    """What a re-render does with the previous bundle's entries (paths relative to the bundle)."""

    moves: list[str]  # kept: moved whole (a file, a link or a folder) into the new tree
    lost: list[str]  # "path (why)": kept entries the new tree cannot hold


def plan_keep(old: Path, new: Path, files: Mapping[str, object]) -> KeepPlan:
    """Match the previous bundle ``old`` against the freshly written tree ``new``.

    An entry that ``new`` lacks is moved whole; a folder in both is merged entry by entry; a file render
    wrote replaces the old one; the owned folders (``app/``, ``constraints/``) are dropped.
    """
    plan = KeepPlan(moves=[], lost=[])

    def walk(rel: str) -> None:
        for entry in sorted((old / rel).iterdir() if rel else old.iterdir()):
            name = f"{rel}/{entry.name}" if rel else entry.name
            target = new / name
            if not rel and entry.name in OWNED_DIRS and real_dir(entry):
                continue  # re-rendered whole
            if not rel and entry.name in OPTIONAL_FILES and not real_dir(entry):
                continue  # written by this render or by none
            if not os.path.lexists(target):
                plan.moves.append(name)
            elif real_dir(target) and real_dir(entry):
                walk(name)
            elif name in files and not real_dir(entry):
                continue  # a file render writes: replaced
            elif name in files:
                plan.lost.append(f"{name} (a folder where the bundle has a file)")
            else:
                plan.lost.append(f"{name} (a file or link where the bundle has a folder)")

    walk("")
    return plan
