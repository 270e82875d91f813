"""The application folder (``[app] source``): what may go into a bundle and an image.

Shared by the loader (so that ``envbuild check`` refuses what ``envbuild render`` would refuse) and
by the renderer (which copies the files).  Symlinks are followed only when they stay inside the
folder; credential files are refused, by name and by content (:mod:`envbuild.secrets`): secrets are
provided at run time, never baked in.  Every file is read in chunks (:mod:`envbuild.filestream`):
hashed and scanned in one pass, and copied at write time, never held whole in memory.

An envbuild bundle inside the folder (render's ``--out``, or any folder with a bundle's marker files)
is skipped, never copied: a bundle rendered inside its own app source would otherwise copy itself in on
every render (``bundle/app/bundle/app/...``, wheelhouse and build logs included).
"""

from __future__ import annotations

import stat
from dataclasses import dataclass, field
from pathlib import Path

from envbuild.errors import BundleError
from envbuild.filestream import FileCopy, hash_and_scan, scan_file
from envbuild.models import INPUTS_FILE
from envbuild.secrets import file_reason

SKIP_NAMES = frozenset(
    {"__pycache__", ".git", ".hg", ".svn", ".DS_Store", ".mypy_cache", ".pytest_cache", ".venv", ".tox"}
)
MAX_SCAN_BYTES = 64 << 20  # larger files are checked by name only (model weights, data sets)
# A folder holding one of these is an envbuild bundle (render's record, the recorded inputs) ...
BUNDLE_FILES = (INPUTS_FILE, "envbuild.rendered.json")
# ... and so is one holding all of these (a bundle written before those files existed).
BUNDLE_PAIR = ("Dockerfile", "envbuild.lock.json")


def secret_file_reason(name: str, data: bytes | None = None) -> str | None:
    """Why a file must stay out of a bundle (the policy: :func:`envbuild.secrets.file_reason`)."""
    return file_reason(name, data)


@dataclass(frozen=True)
class AppFolder:
    """The files to copy (relative POSIX path -> :class:`FileCopy`, sorted; empty when only checked)
    and the folders skipped as bundles (``"old/b1/ (an envbuild bundle ...)"``)."""

    files: dict[str, FileCopy] = field(default_factory=dict)
    skipped: tuple[str, ...] = ()


def bundle_reason(folder: Path, out: Path | None = None) -> str | None:
    """Why ``folder`` is an envbuild bundle (or render's own working files for ``out``), or None."""
    if out is not None:
        if folder == out:
            return "the --out folder, which render is writing"
        name = folder.name
        if folder.parent == out.parent and name.startswith((f".{out.name}.tmp-", f".{out.name}.old-")):
            return "render's working folder for --out"
    if any((folder / marker).is_file() for marker in BUNDLE_FILES) or all(
        (folder / marker).is_file() for marker in BUNDLE_PAIR
    ):
        return "an envbuild bundle"
    return None


def collect_app(root: Path, where: str, *, read: bool = True, out: Path | None = None) -> AppFolder:
    """Every file under ``root``, in sorted order, hashed and scanned (see the module doc).

    Symlinks are followed only when they stay inside ``root``; anything else (a link out, a
    socket, a device) is refused, and so are credential files by name (``.env``, ``.envrc``,
    ``.netrc``, ``credentials.json``, ``service-account*.json``, ``kubeconfig``, SSH keys ...) and any
    file whose bytes hold a secret (a private key in a ``*.pem``, a token in a config file; files over
    :data:`MAX_SCAN_BYTES` by name only): secrets are provided at run time.  ``__pycache__``, VCS
    folders and virtualenvs are skipped, and so are envbuild bundles (:func:`bundle_reason`; ``out``:
    the bundle folder render writes), each named in ``skipped``.  With ``read=False`` the folder is
    only checked (no file is hashed, ``files`` is empty).
    """
    files: dict[str, FileCopy] = {}
    skipped: list[str] = []
    seen: set[Path] = set()
    out = out.resolve() if out is not None else None
    if out is not None and (root == out or out in root.parents):
        raise BundleError(f"{where}: {root} lies inside the bundle folder {out}; choose another --out")

    def walk(folder: Path, rel: str) -> None:
        real = folder.resolve()
        if real in seen:
            raise BundleError(f"{where}: symlink loop at {rel or '.'}")
        seen.add(real)
        for entry in sorted(folder.iterdir(), key=lambda p: p.name):
            if entry.name in SKIP_NAMES:
                continue
            name = f"{rel}/{entry.name}" if rel else entry.name
            _refuse(where, name, secret_file_reason(entry.name))
            target = entry.resolve()
            if target != root and root not in target.parents:
                raise BundleError(f"{where}: {name} is a link that leads outside {root}")
            info = target.stat()
            if stat.S_ISDIR(info.st_mode):
                why = bundle_reason(target, out)
                if why:
                    skipped.append(f"{name}/ ({why})")
                else:
                    walk(target, name)
            elif stat.S_ISREG(info.st_mode):
                scan, reason = info.st_size <= MAX_SCAN_BYTES, None
                if read:
                    files[name], reason = hash_and_scan(target, entry.name, scan=scan)
                elif scan:
                    reason = scan_file(target, entry.name)
                _refuse(where, name, reason)
            else:
                raise BundleError(f"{where}: {name} is not a regular file or folder")
        seen.discard(real)

    walk(root, "")
    return AppFolder(files=dict(sorted(files.items())), skipped=tuple(skipped))


def _refuse(where: str, name: str, reason: str | None) -> None:
    if reason:
        raise BundleError(
            f"{where}: {name} {reason}; secrets never go into a bundle or an image: remove it "
            "from the app folder and provide it at run time (docker run -e / --env-file / -v)"
        )
