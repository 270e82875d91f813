"""Files a profile pulls in: where they are, how they are named, and the rule that keeps them inside.

Every file envbuild reads for a profile is a :class:`Place`.  Its ``label`` is machine-independent
(``builtin:custom/requirements.txt`` or a path relative to the root profile's folder) and is what goes
into hashes and provenance; its ``display`` is the path as the user would type it, for messages.
A relative reference must pass :func:`envbuild.profile.fields.check_rel_path` and, once symlinks are
resolved, stay inside the ``boundary`` folder (the root profile's folder, or ``profiles_dir()`` for
built-ins).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path

from envbuild.profile.fields import check_rel_path

MAX_FILE_BYTES = 4 * 1024 * 1024


class PlaceError(Exception):
    """A reference cannot be followed; the message is meant for an :class:`~envbuild.errors.Issue`."""


@dataclass(frozen=True)
class Place:
    path: Path  # absolute, symlinks not resolved
    label: str  # "builtin:pytorch.toml" or "sub/base.toml" (relative to the root folder)
    display: str  # for messages
    boundary: Path  # resolved folder the file and everything it refers to must stay in

    @property
    def builtin(self) -> bool:
        return self.label.startswith("builtin:")

    def child_label(self, rel: str) -> str:
        """The label ``rel`` (already syntax-checked) gets: where it is, relative to the root folder."""
        prefix = "builtin:" if self.builtin else ""
        base_label = posixpath.dirname(self.label.removeprefix("builtin:"))
        return prefix + posixpath.normpath(posixpath.join(base_label, rel))

    def child(self, rel: str, *, must_be_dir: bool = False) -> Place:
        """Resolve ``rel`` against this file's folder; raise :class:`PlaceError` when it escapes."""
        problem = check_rel_path(rel)
        if problem:
            raise PlaceError(problem)
        target = self.path.parent / rel
        label = self.child_label(rel)
        display = (
            label
            if self.builtin
            else posixpath.normpath(posixpath.join(posixpath.dirname(self.display), rel))
        )
        place = Place(target, label, display, self.boundary)
        try:
            resolved = target.resolve(strict=True)
        except FileNotFoundError:
            raise PlaceError(f"{rel!r} does not exist (looked for {display})") from None
        except (OSError, RuntimeError) as exc:
            raise PlaceError(f"{rel!r} cannot be resolved: {exc}") from None
        if not resolved.is_relative_to(self.boundary):
            raise PlaceError(f"{rel!r} resolves outside the profile's folder (a symlink escapes it)")
        if must_be_dir and not resolved.is_dir():
            raise PlaceError(f"{rel!r} is not a folder")
        if not must_be_dir and not resolved.is_file():
            raise PlaceError(f"{rel!r} is not a regular file")
        return place

    def read(self) -> bytes:
        try:
            size = self.path.stat().st_size
            if size > MAX_FILE_BYTES:
                raise PlaceError(f"file is too large ({size} bytes, at most {MAX_FILE_BYTES})")
            return self.path.read_bytes()
        except OSError as exc:
            raise PlaceError(f"cannot read: {exc.strerror or exc}") from None


def root_place(path: Path, display: str) -> Place:
    """The place of a profile given on the command line; its folder is the boundary."""
    resolved = path.resolve()
    return Place(resolved, resolved.name, display, resolved.parent)


def builtin_place(folder: Path, name: str) -> Place:
    return Place(folder / f"{name}.toml", f"builtin:{name}.toml", f"builtin:{name}", folder.resolve())
