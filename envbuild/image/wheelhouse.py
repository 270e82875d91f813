"""The wheelhouse of a resolved bundle: exactly the locked files, each checked against its sha256.

``fetch`` downloads every file the lock names (from the URL the resolver found it at: an index, or a
``--find-links`` URL, with the index's credentials filled from the environment) and checks its bytes as
they arrive; a file the lock took from a local ``--find-links`` folder (recorded by name and sha256,
never by path) is copied from a folder given to ``fetch --find-links`` and checked the same way; a file
already present with the right hash is kept.  ``build`` calls :func:`verify_wheelhouse` before the
engine is contacted, so a file whose bytes differ from the lock (same name, other content) stops the
build with both hashes named.
"""

from __future__ import annotations

import errno
import hashlib
import queue
import shutil
import threading
import time
import zipfile
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from envbuild import atomic
from envbuild.digest import sha256_file
from envbuild.errors import BuildError, BundleError, UsageError
from envbuild.models import Lock, LockedDistribution, LockedFile
from envbuild.net import download, redact_url

WORKERS = 4
# After Ctrl-C, how long the downloads in flight get to see the cancel and remove their temporary files
# before fetch stops waiting for them (a read stalled on a silent server never sees it).
CANCEL_WAIT_S = 0.5
J = TypeVar("J")
# A write into the wheelhouse failed for want of room (or a file-size limit), not for the network.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def _safe_name(name: str) -> str:
    if not name or "/" in name or "\\" in name or name.startswith(".") or "\0" in name:
        raise BundleError(f"the lock names a file {name!r} that cannot be written into a wheelhouse")
    return name


def _from_folders(
    dist: LockedDistribution, file: LockedFile, target: Path, folders: tuple[Path, ...]
) -> None:
    """Copy a file the lock took from a local ``--find-links`` folder (recorded by name and sha256 only)
    from one of ``folders`` into ``target``, checking its sha256."""
    other: list[str] = []
    for folder in folders:
        candidate = folder / file.filename
        if not candidate.is_file():
            continue
        got = sha256_file(candidate)
        if got != file.sha256:
            other.append(f"{candidate} (sha256 {got})")
            continue
        try:
            with candidate.open("rb") as source, atomic.writing(target) as out:
                shutil.copyfileobj(source, out, 1 << 20)
        except OSError as exc:
            raise BuildError(f"fetch: cannot copy {candidate} to {target}: {exc.strerror or exc}") from None
        return
    where = (
        "; the folder(s) given hold another file by that name: " + ", ".join(other)
        if other
        else f" in {', '.join(map(str, folders))}"
        if folders
        else ""
    )
    raise UsageError(
        f"fetch: {dist.spec}: the lock took {file.filename} (sha256 {file.sha256}) from a local --find-links "
        f"folder, which it records by file name and sha256, not by path, and it is not in the wheelhouse"
        f"{where}. Pass the folder that holds it: `envbuild fetch BUNDLE --find-links DIR`"
    )


def with_credentials(url: str, lock: Lock, index_urls: tuple[str, ...] = ()) -> str:
    """``url`` with the user info of the lock's index (or ``--find-links`` URL) on the same host, its
    ``${VAR}`` references filled from the environment (as pip fills them), or of a given ``index_urls``
    entry; unchanged when none has user info.  A variable left unset is a usage error naming it."""
    from urllib.parse import urlsplit, urlunsplit

    from envbuild.lock.urls import expand, unset_variables

    parts = urlsplit(url)
    if "@" in parts.netloc:
        return url
    res = lock.resolution
    candidates = [*index_urls, *((res.index_urls + res.find_links) if res is not None else ())]
    for candidate in candidates:
        index = urlsplit(candidate)
        if "@" not in index.netloc or index.netloc.rsplit("@", 1)[1] != parts.netloc:
            continue
        info = index.netloc.rsplit("@", 1)[0]
        unset = unset_variables(info)
        if unset:
            raise UsageError(
                f"fetch: {redact_url(url)} is on an index that needs credentials ({redact_url(candidate)}): "
                f"set {', '.join(unset)} in the environment (the lock names them, never their values)"
            )
        return urlunsplit(parts._replace(netloc=f"{expand(info)}@{parts.netloc}"))
    return url


def _fetch_one(
    dist: LockedDistribution,
    file: LockedFile,
    dest: Path,
    folders: tuple[Path, ...] = (),
    lock: Lock | None = None,
    index_urls: tuple[str, ...] = (),
    cancel: threading.Event | None = None,
) -> bool:
    """Download ``file`` into ``dest`` unless it is there with the right hash; True when downloaded."""
    target = dest / _safe_name(file.filename)
    if target.is_file() and sha256_file(target) == file.sha256:
        return False
    if not file.url:  # from a local --find-links folder: found again by name and sha256
        _from_folders(dist, file, target, folders)
        return True
    digest = hashlib.sha256()
    url = with_credentials(file.url, lock, index_urls) if lock is not None else file.url
    try:
        download(url, target, update=digest.update, cancel=cancel)
    except OSError as exc:
        if exc.errno in DISK_ERRNOS:  # download() removed its temporary file; the wheelhouse is as it was
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


def download_locked(
    lock: Lock,
    dest: Path,
    say: Callable[[str], None] = lambda _: None,
    *,
    find_links: tuple[str, ...] = (),
    index_urls: tuple[str, ...] = (),
    distributions: tuple[LockedDistribution, ...] | None = None,
) -> Downloaded:
    """Every locked file (of ``distributions``, default the lock's) into ``dest``, each checked against
    its sha256.  A file the lock took from a local ``--find-links`` folder is copied from one of the
    local folders in ``find_links``; a file on an index with credentials is downloaded with them
    (:func:`with_credentials`)."""
    from envbuild.lock.urls import is_local, local_path

    folders = tuple(Path(local_path(link)) for link in find_links if is_local(link))
    dists = lock.distributions if distributions is None else distributions
    # each file once: a distribution locked in two roles (the image's and the builder's toolkit) has the
    # same files in both
    unique = {file.filename: (dist, file) for dist in dists for file in dist.files}
    jobs = list(unique.values())
    total = sum(f.size or 0 for _, f in jobs)
    say(f"fetching {len(jobs)} locked file(s) ({total / 1e6:.0f} MB) into {dest}")
    done = run_cancellable(
        jobs,
        lambda job, cancel: _fetch_one(job[0], job[1], dest, folders, lock, index_urls, cancel),
        [dest / file.filename for _, file in jobs],
    )
    checked = {file.filename: file.sha256 for _, file in jobs}
    return Downloaded(sum(done), len(done) - sum(done), checked)


def run_cancellable(
    jobs: Sequence[J], work: Callable[[J, threading.Event], bool], targets: Sequence[Path]
) -> list[bool]:
    """``work(job, cancel)`` for every job, :data:`WORKERS` at a time; the results in job order.

    The workers are daemon threads, so a download stalled on a silent server cannot hold the process
    (a ``ThreadPoolExecutor`` is joined at exit).  A failed job does not stop the others; the first
    failure (in job order) is raised once all are done.  On Ctrl-C (``KeyboardInterrupt`` in this, the
    main thread) ``cancel`` is set, the workers get :data:`CANCEL_WAIT_S` to stop, the temporary files of
    every path of ``targets`` (the files the jobs write; :func:`envbuild.atomic.leftovers`) are removed,
    and the interrupt goes on.
    """
    cancel = threading.Event()
    todo: queue.SimpleQueue[tuple[int, J]] = queue.SimpleQueue()
    for item in enumerate(jobs):
        todo.put(item)
    results: queue.SimpleQueue[tuple[int, bool | BaseException]] = queue.SimpleQueue()

    def worker() -> None:
        while not cancel.is_set():
            try:
                i, job = todo.get_nowait()
            except queue.Empty:
                return
            try:
                results.put((i, work(job, cancel)))
            except BaseException as exc:  # handed to the main thread, which raises it
                results.put((i, exc))

    threads = [
        threading.Thread(target=worker, name=f"envbuild-fetch-{n}", daemon=True)
        for n in range(min(WORKERS, len(jobs)))
    ]
    got: dict[int, bool | BaseException] = {}
    try:
        for thread in threads:
            thread.start()
        while len(got) < len(jobs):
            try:
                i, result = results.get(timeout=0.2)  # a short wait: Ctrl-C is seen at once
            except queue.Empty:
                continue
            got[i] = result
    except KeyboardInterrupt:
        cancel.set()
        deadline = time.monotonic() + CANCEL_WAIT_S
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        for target in targets:  # a worker stalled on a silent server never reaches its own cleanup
            for part in atomic.leftovers(target):
                part.unlink(missing_ok=True)
        raise
    for i in range(len(jobs)):
        failed = got[i]
        if isinstance(failed, BaseException):
            raise failed
    return [bool(got[i]) for i in range(len(jobs))]


def verify_wheelhouse(lock: Lock, house: Path) -> int:
    """For a resolved lock: every locked file in ``house`` has the locked bytes.

    An empty wheelhouse is allowed (pip then downloads, checking the same hashes); a partly filled one
    must hold every locked file.  Returns the number of files checked.
    """
    if not lock.resolved or not house.is_dir():
        return 0
    if not any(p.is_file() for p in house.glob("*.whl")):
        return 0
    # the locked files: wheels, and the sdists of [python] build_from_source
    present = {
        p.name for p in house.iterdir() if p.is_file() and p.name.endswith((".whl", ".tar.gz", ".zip"))
    }
    problems: list[str] = []
    missing: list[str] = []
    checked = 0
    seen: set[str] = set()  # a distribution locked in two roles has the same files in both
    for dist in lock.distributions:
        for file in dist.files:
            if file.filename in seen:
                continue
            seen.add(file.filename)
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
