"""The application folder (``[app] source``): what may go into a bundle and an image.

Shared by the loader (so that ``envbuild check`` refuses what ``envbuild render`` would refuse) and
by the renderer (which copies the files).  Symlinks are followed only when they stay inside the
folder; credential files are refused, by name and by content (:mod:`envbuild.secrets`): secrets are
provided at run time, never baked in.
"""

from __future__ import annotations

import stat
from pathlib import Path

from envbuild.errors import BundleError
from envbuild.secrets import file_reason

SKIP_NAMES = frozenset(
    {"__pycache__", ".git", ".hg", ".svn", ".DS_Store", ".mypy_cache", ".pytest_cache", ".venv", ".tox"}
)
MAX_SCAN_BYTES = 64 << 20  # larger files are checked by name only (model weights, data sets)


def secret_file_reason(name: str, data: bytes | None = None) -> str | None:
    """Why a file must stay out of a bundle (the policy: :func:`envbuild.secrets.file_reason`)."""
    return file_reason(name, data)


def collect_app(root: Path, where: str, *, read: bool = True) -> dict[str, bytes]:
    """Every file under ``root`` (relative POSIX path -> bytes), in sorted order.

    Symlinks are followed only when they stay inside ``root``; anything else (a link out, a
    socket, a device) is refused, and so are credential files by name (``.env``, ``.envrc``,
    ``.netrc``, ``credentials.json``, ``service-account*.json``, ``kubeconfig``, SSH keys ...) and any
    file whose bytes hold a secret (a private key in a ``*.pem``, a token in a config file; files over
    :data:`MAX_SCAN_BYTES` by name only): secrets are provided at run time.  ``__pycache__``, VCS
    folders and virtualenvs are skipped.  With ``read=False`` the folder is only checked (values are
    empty).
    """
    files: dict[str, bytes] = {}
    seen: set[Path] = set()

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
                walk(target, name)
            elif stat.S_ISREG(info.st_mode):
                data = target.read_bytes() if read or info.st_size <= MAX_SCAN_BYTES else b""
                if len(data) <= MAX_SCAN_BYTES:
                    _refuse(where, name, secret_file_reason(entry.name, data))
                files[name] = data if read else b""
            else:
                raise BundleError(f"{where}: {name} is not a regular file or folder")
        seen.discard(real)

    walk(root, "")
    return dict(sorted(files.items()))


def _refuse(where: str, name: str, reason: str | None) -> None:
    if reason:
        raise BundleError(
            f"{where}: {name} {reason}; secrets never go into a bundle or an image: remove it "
            "from the app folder and provide it at run time (docker run -e / --env-file / -v)"
        )
