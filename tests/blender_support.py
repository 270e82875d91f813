"""Stand-ins for the official Blender tarball (download.blender.org is not reachable from here): a small
tarball named like the release with a ``blender`` shell script in it, its checksum list in the format of
Blender's published ``blender-X.Y.Z.sha256``, and the catalog without its pinned tarball sha256s."""

from __future__ import annotations

import dataclasses
import hashlib
import tarfile
from pathlib import Path

from envbuild.catalog import Catalog, load_catalog

TARBALL = "blender-4.5.3-linux-x64.tar.xz"


SUMS = "blender-4.5.3.sha256"


def unpinned() -> Catalog:
    """The packaged catalog without its pinned tarball sha256s (``[[tarball]]`` rows)."""
    catalog = load_catalog()
    return dataclasses.replace(catalog, blender=dataclasses.replace(catalog.blender, tarball=()))


def release(folder: Path, *, listed: bytes | None = None) -> str:
    """A stand-in tarball and its checksum list in ``folder``; returns the tarball's sha256.

    ``listed``: other bytes whose digest the list gives instead (a tampered or wrong download)."""
    folder.mkdir(parents=True, exist_ok=True)
    payload = folder / "blender-4.5.3-linux-x64"
    payload.mkdir()
    (payload / "blender").write_text("#!/bin/sh\necho 'Blender 4.5.3 (stand-in)'\n")
    with tarfile.open(folder / TARBALL, "w:xz") as tar:
        tar.add(payload, arcname=payload.name)
    (payload / "blender").unlink()
    payload.rmdir()
    digest = hashlib.sha256((folder / TARBALL).read_bytes()).hexdigest()
    shown = hashlib.sha256(listed).hexdigest() if listed is not None else digest
    (folder / SUMS).write_text(f"{'e' * 64}  blender-4.5.3-windows-x64.zip\n{shown}  {TARBALL}\n")
    return digest
