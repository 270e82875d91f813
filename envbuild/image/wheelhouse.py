"""The wheelhouse of a resolved bundle: exactly the locked files, each checked against its sha256.

``fetch`` downloads every file the lock names (from the URL the resolver found it at: an index, or a
``--find-links`` folder) and checks its bytes as they arrive; a file already present with the right
hash is kept.  ``build`` calls :func:`verify_wheelhouse` before the engine is contacted, so a file whose
bytes differ from the lock (same name, other content) stops the build with both hashes named.
"""

from __future__ import annotations

import errno
import hashlib
import zipfile
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from envbuild.digest import sha256_file
from envbuild.errors import BuildError, BundleError
from envbuild.models import Lock, LockedDistribution, LockedFile
from envbuild.net import download, redact_url

WORKERS = 4
# A write into the wheelhouse failed for want of room (or a file-size limit), not for the network.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def _safe_name(name: str) -> str:
    if not name or "/" in name or "\\" in name or name.startswith(".") or "\0" in name:
        raise BundleError(f"the lock names a file {name!r} that cannot be written into a wheelhouse")
    return name


def _fetch_one(dist: LockedDistribution, file: LockedFile, dest: Path) -> bool:
    """Download ``file`` into ``dest`` unless it is there with the right hash; True when downloaded."""
    target = dest / _safe_name(file.filename)
    if target.is_file() and sha256_file(target) == file.sha256:
        return False
    digest = hashlib.sha256()
    try:
        download(file.url, target, update=digest.update)
    except OSError as exc:
        if exc.errno in DISK_ERRNOS:  # download() removed its .part file; the wheelhouse is as it was
            raise BuildError(
                f"fetch: cannot write {target}: {exc.strerror}; nothing half-written was kept (files "
                "already fetched are complete and checked). Free space (or fetch into another "
                "--wheelhouse) and run `envbuild fetch` again"
            ) from None
        raise BuildError(
            f"fetch: cannot download {dist.spec} from {redact_url(file.url)}: {exc}; the lock's index or "
            "--find-links folder must be reachable from this host (or lock again with --index-url / "
            "--find-links)"
        ) from None
    if digest.hexdigest() != file.sha256:
        target.unlink(missing_ok=True)
        raise BuildError(
            f"fetch: {dist.spec}: {file.filename} from {redact_url(file.url)} has sha256 "
            f"{digest.hexdigest()}, but the lock says {file.sha256}; the file changed since it was locked. "
            "Nothing was kept"
        )
    return True


@dataclass(frozen=True)
class Downloaded:
    downloaded: int  # files fetched now
    kept: int  # files already in place with the locked sha256
    sha256: dict[str, str]  # file name -> sha256, each checked against the lock


def download_locked(lock: Lock, dest: Path, say: Callable[[str], None] = lambda _: None) -> Downloaded:
    """Every locked file into ``dest``, each checked against its sha256."""
    jobs = [(dist, file) for dist in lock.distributions for file in dist.files]
    total = sum(f.size or 0 for _, f in jobs)
    say(f"fetching {len(jobs)} locked file(s) ({total / 1e6:.0f} MB) into {dest}")
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        done = list(pool.map(lambda job: _fetch_one(job[0], job[1], dest), jobs))
    checked = {file.filename: file.sha256 for _, file in jobs}
    return Downloaded(sum(done), len(done) - sum(done), checked)


def verify_wheelhouse(lock: Lock, house: Path) -> int:
    """For a resolved lock: every locked file in ``house`` has the locked bytes.

    An empty wheelhouse is allowed (pip then downloads, checking the same hashes); a partly filled one
    must hold every locked file.  Returns the number of files checked.
    """
    if not lock.resolved or not house.is_dir():
        return 0
    present = {p.name for p in house.glob("*.whl") if p.is_file()}
    if not present:
        return 0
    problems: list[str] = []
    missing: list[str] = []
    checked = 0
    for dist in lock.distributions:
        for file in dist.files:
            if file.filename not in present:
                missing.append(f"{dist.spec} ({file.filename})")
                continue
            path = house / file.filename
            got = sha256_file(path)
            checked += 1
            if got != file.sha256:
                problems.append(
                    f"{dist.spec}: {path} has sha256 {got}, the lock says {file.sha256}{_damage(path, file)}"
                )
    if problems:
        raise BuildError(
            "the wheelhouse does not match the lock (a file with the same name but other bytes):\n"
            + "\n".join(f"  - {p}" for p in problems)
            + f"\nRun `{_fetch_hint(house)}` again, which replaces files whose hash differs; nothing was "
            "built"
        )
    if missing:
        raise BundleError(
            f"{house}: holds wheels but not every locked file; missing {len(missing)}: "
            f"{', '.join(missing[:8])}"
            + (" ..." if len(missing) > 8 else "")
            + f"; run `{_fetch_hint(house)}`"
        )
    return checked


def _fetch_hint(house: Path) -> str:
    """The fetch command that refills ``house`` (a bundle's own wheelhouse, or a --wheelhouse)."""
    if house.name == "wheelhouse":
        return f"envbuild fetch {house.parent}"
    return f"envbuild fetch BUNDLE --wheelhouse {house}"


def _damage(path: Path, file: LockedFile) -> str:
    """Why a file's hash differs, when its bytes say: cut short (a download or copy that stopped), or no
    longer a readable wheel (a damaged zip).  Empty when it is a whole, other wheel (tampered)."""
    size = path.stat().st_size
    if file.size is not None and size < file.size:
        return f" (truncated: {size} of {file.size} bytes)"
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError, NotImplementedError):
        return f" (not a readable zip: {size} bytes, damaged or truncated)"
    if bad is not None:
        return f" (damaged: the zip member {bad} fails its CRC check)"
    return ""
