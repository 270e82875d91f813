"""Write a bundle atomically: everything is rendered in memory, written to a temporary folder beside
``out``, then swapped in.  A previous bundle is replaced whole; any other non-empty folder is refused.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from envbuild.errors import BundleError
from envbuild.models import LOCK_FORMAT, Profile
from envbuild.resources import profiles_dir

KEEP_DIRS = ("app", "certs", "tools", "wheelhouse")
# What marks a folder as a previous envbuild bundle (safe to replace).
BUNDLE_MARKERS = ("Dockerfile", "envbuild.lock.json")


def is_bundle(path: Path) -> bool:
    if not all((path / marker).is_file() for marker in BUNDLE_MARKERS):
        return False
    try:
        head = (path / "envbuild.lock.json").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return f'"format": "{LOCK_FORMAT}"' in head


def app_source(profile: Profile) -> Path | None:
    if not profile.app.source:
        return None
    base = Path(profile.folder) if profile.folder else profiles_dir()
    root = (base / profile.app.source).resolve()
    if not root.is_dir():
        raise BundleError(f"{profile.path}: app.source: {profile.app.source!r} is not a folder ({root})")
    return root


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


def write_tree(files: dict[str, bytes], out: Path, executable: frozenset[str] = frozenset()) -> Path:
    """Write ``files`` (relative POSIX path -> bytes) as the folder ``out``, atomically.

    Files are mode 0644 (0755 when listed in ``executable``), folders 0755, whatever the umask.
    """
    out = out.absolute()
    prepare_out(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    except OSError as exc:
        message = f"{out}: cannot create the bundle folder: {exc.strerror}; choose another --out"
        raise BundleError(message) from exc
    old: Path | None = None
    try:
        for rel, data in sorted(files.items()):
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            path.chmod(0o755 if rel in executable else 0o644)
        for folder in sorted({tmp, *(p for p in tmp.rglob("*") if p.is_dir())}):
            folder.chmod(0o755)
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
            os.rename(out, old / "bundle")
        os.rename(tmp, out)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and (old / "bundle").exists() and not out.exists():
            os.rename(old / "bundle", out)  # put the previous bundle back
        if isinstance(exc, OSError):
            raise BundleError(f"{out}: cannot write the bundle: {exc.strerror}; nothing was changed") from exc
        raise
    finally:
        if old is not None:
            with contextlib.suppress(OSError):
                shutil.rmtree(old)
    return out
