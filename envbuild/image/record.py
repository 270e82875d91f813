"""Build records: what went into an image and what came out, down to every file's bytes.

A record is computed from the engine's ``docker save`` stream (:mod:`envbuild.image.save_stream`) of an
image in the engine (:mod:`envbuild.image.recording`).

What the record holds (``format`` 1):

- ``inputs``: the lock's sha256, the base image's id and layer DiffIDs, every wheel's sha256 (from the
  lock), and the Debian packages installed (name, version, architecture from ``/var/lib/dpkg/status``);
- ``outputs``: the image id and layer DiffIDs, and the Python distributions installed (name, version,
  installer, from each ``*.dist-info``);
- ``manifest``: every path with its type, mode, uid, gid, size, sha256 and link target.  No timestamps:
  two builds of the same inputs compare equal on content even though the classic builder gives them
  different image ids.

Ownership (which dpkg package or Python distribution installed a path, from ``*.list`` and
``RECORD``) is kept too, so that a difference can be attributed (:mod:`envbuild.image.diff`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from envbuild import atomic
from envbuild.errors import BundleError

FORMAT = 1


@dataclass(frozen=True)
class FileEntry:
    path: str  # absolute, normalised: "/usr/bin/python3"
    type: str  # file, dir, symlink, hardlink, char, block, fifo
    mode: int  # permission bits (and setuid/setgid/sticky), without the type
    uid: int
    gid: int
    size: int
    sha256: str | None = None  # files (and hardlinks, the target's content)
    link: str | None = None  # symlink or hardlink target

    def row(self) -> list[Any]:
        return [self.path, self.type, self.mode, self.uid, self.gid, self.size, self.sha256, self.link]

    @classmethod
    def from_row(cls, row: list[Any]) -> FileEntry:
        path, kind, mode, uid, gid, size, sha, link = row
        return cls(str(path), str(kind), int(mode), int(uid), int(gid), int(size), sha, link)

    def content_key(self) -> tuple[Any, ...]:
        return (self.type, self.size, self.sha256, self.link)

    def meta_key(self) -> tuple[int, int, int]:
        return (self.mode, self.uid, self.gid)


@dataclass(frozen=True)
class AptPackage:
    name: str
    version: str
    arch: str


@dataclass(frozen=True)
class PyDist:
    name: str
    version: str
    installer: str
    location: str  # the .dist-info folder


@dataclass
class ImageFiles:
    """The flattened file system of an image and what the record derives from it."""

    entries: dict[str, FileEntry]
    apt: list[AptPackage] = field(default_factory=list)
    python: list[PyDist] = field(default_factory=list)
    owners: dict[str, str] = field(default_factory=dict)  # path -> "deb:NAME" / "py:NAME"


@dataclass
class Record:
    tag: str
    image_id: str
    diff_ids: list[str]
    files: ImageFiles
    inputs: dict[str, Any] = field(default_factory=dict)
    envbuild: str = ""
    # [python] build_from_source: the wheels the builder stage built ({"file", "sha256"}), from the build
    # log; they cannot be in the lock, as they exist only after the build
    built_wheels: list[dict[str, str]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        entries = [self.files.entries[p] for p in sorted(self.files.entries)]
        return {
            "format": FORMAT,
            "envbuild": self.envbuild,
            "tag": self.tag,
            "inputs": {**self.inputs, "apt": [asdict(a) for a in self.files.apt]},
            "outputs": {
                "image_id": self.image_id,
                "diff_ids": self.diff_ids,
                "python": [asdict(d) for d in self.files.python],
                "files": len(entries),
                **({"built_wheels": self.built_wheels} if self.built_wheels else {}),
            },
            "owners": dict(sorted(self.files.owners.items())),
            "manifest_columns": ["path", "type", "mode", "uid", "gid", "size", "sha256", "link"],
            "manifest": [e.row() for e in entries],
        }

    def write(self, path: Path) -> None:
        """Write atomically (a temporary file beside ``path``, then a rename)."""
        text = json.dumps(self.as_json(), indent=None, separators=(",", ":"), sort_keys=True) + "\n"
        try:
            atomic.write_text(path, text)
        except OSError as exc:
            raise BundleError(f"{path}: cannot write the build record: {exc.strerror or exc}") from None


def recorded_built_wheels(path: Path) -> list[dict[str, str]]:
    """The wheels a build record says its builder stage built (``outputs.built_wheels``: ``{"file",
    "sha256"}``); a damaged record is a :class:`BundleError` naming it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"format {data.get('format') if isinstance(data, dict) else None!r}")
        rows = data["outputs"].get("built_wheels", [])
        return [{"file": str(r["file"]), "sha256": str(r["sha256"])} for r in rows]
    except OSError as exc:
        raise BundleError(f"{path}: cannot read the build record: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BundleError(f"{path}: not a build record envbuild can read ({exc})") from None


def read_record(path: Path) -> Record:
    """A record written by :meth:`Record.write`; a damaged one is a :class:`BundleError` naming it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != FORMAT:
            raise ValueError(f"format {data.get('format')!r}, expected {FORMAT}")
        entries = {row[0]: FileEntry.from_row(row) for row in data["manifest"]}
        outputs = data["outputs"]
        inputs = dict(data["inputs"])
        files = ImageFiles(
            entries=entries,
            apt=[AptPackage(**a) for a in inputs.pop("apt", [])],
            python=[PyDist(**d) for d in outputs["python"]],
            owners=dict(data.get("owners", {})),
        )
        return Record(
            tag=data["tag"],
            image_id=outputs["image_id"],
            diff_ids=list(outputs["diff_ids"]),
            files=files,
            inputs=inputs,
            envbuild=data.get("envbuild", ""),
        )
    except OSError as exc:
        raise BundleError(f"{path}: cannot read the build record: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise BundleError(f"{path}: not a build record envbuild can read ({exc})") from None
