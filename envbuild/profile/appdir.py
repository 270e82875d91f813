"""The application folder (``[app] source``): what may go into a bundle and an image.

Shared by the loader (so that ``envbuild check`` refuses what ``envbuild render`` would refuse) and
by the renderer (which copies the files).  Symlinks are followed only when they stay inside the
folder; credential files are refused: secrets are provided at run time, never baked in.
"""

from __future__ import annotations

import stat
from pathlib import Path

from envbuild.errors import BundleError

SKIP_NAMES = frozenset(
    {"__pycache__", ".git", ".hg", ".svn", ".DS_Store", ".mypy_cache", ".pytest_cache", ".venv", ".tox"}
)
# Files that hold credentials: refused, so that a secret never lands in a bundle or an image.
SECRET_NAMES = frozenset(
    {".env", ".netrc", ".pypirc", ".npmrc", ".git-credentials", ".ssh", ".aws", ".docker", ".kube", ".gnupg"}
)
SECRET_PATTERNS = ("id_rsa", "id_dsa", "id_ecdsa", "id_ed25519")
SECRET_SUFFIXES = (".pem", ".key", ".p12", ".pfx")


def secret_file_reason(name: str) -> str | None:
    lowered = name.lower()
    if lowered in SECRET_NAMES or lowered.startswith(".env."):
        return "is a credentials file or folder"
    if lowered.startswith(SECRET_PATTERNS):
        return "looks like an SSH private key"
    if lowered.endswith(SECRET_SUFFIXES):
        return "looks like a private key or certificate bundle"
    return None


def collect_app(root: Path, where: str, *, read: bool = True) -> dict[str, bytes]:
    """Every file under ``root`` (relative POSIX path -> bytes), in sorted order.

    Symlinks are followed only when they stay inside ``root``; anything else (a link out, a
    socket, a device) is refused, and so are credential files (``.env``, ``.netrc``, SSH keys,
    ``*.pem``/``*.key``): secrets are provided at run time.  ``__pycache__``, VCS folders and
    virtualenvs are skipped.  With ``read=False`` the folder is only checked (values are empty).
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
            reason = secret_file_reason(entry.name)
            if reason:
                raise BundleError(
                    f"{where}: {name} {reason}; secrets never go into a bundle or an image: remove it "
                    "from the app folder and provide it at run time (docker run -e / --env-file / -v)"
                )
            target = entry.resolve()
            if target != root and root not in target.parents:
                raise BundleError(f"{where}: {name} is a link that leads outside {root}")
            mode = target.stat().st_mode
            if stat.S_ISDIR(mode):
                walk(target, name)
            elif stat.S_ISREG(mode):
                files[name] = target.read_bytes() if read else b""
            else:
                raise BundleError(f"{where}: {name} is not a regular file or folder")
        seen.discard(real)

    walk(root, "")
    return dict(sorted(files.items()))
