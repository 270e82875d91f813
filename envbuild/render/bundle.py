"""Write a bundle atomically: everything is rendered in memory, written to a temporary folder beside
``out``, then swapped in.  Any other non-empty folder is refused.

Re-rendering into a previous bundle replaces what render owns (the files it writes, and the whole
``app/`` and ``constraints/`` folders) and keeps everything else: the fetched ``wheelhouse/`` and
``tools/``, ``certs/``, build logs and records, the user's notes.  Kept entries are moved (renamed, never
copied) into the new tree before the swap, and moved back when the swap fails.  A kept entry that the
new render cannot hold (a folder where render writes a file, a file or link where it needs a folder) is
refused, naming every such path, unless ``force`` is set, which replaces it.  A resolved lock whose
inputs did not change is kept, and the user's edits under ``app/`` and ``constraints/`` are moved to
``kept-edits/`` (or dropped with ``discard_edits``): see :mod:`envbuild.render.rerender`.

A render killed on its way (SIGKILL, power loss) hides nothing: before moving any kept entry it writes
the list of moves (``moves.json``, fsynced) into ``.<name>.old-<suffix>``, paired with the new tree
``.<name>.tmp-<suffix>``; the next render, under the lock, first finishes the swap (when the new tree is
complete and ``out`` is gone) or moves every listed entry back, and says so (:func:`recover`).

Two renders into the same folder at once: each takes an exclusive lock on ``.<name>.render-lock`` beside
``out`` (``flock``, released when the process ends, however it ends) before it looks at ``out``; the one
that finds it taken fails at once, changing nothing.  A write that fails (a full disk: ENOSPC, EFBIG)
names the file and leaves ``out`` as it was, with no temporary folder behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from envbuild.errors import BundleError
from envbuild.models import LOCK_FORMAT, Profile
from envbuild.render.rerender import (
    KEPT_EDITS,
    LOCK_WRITES,
    RECORD_FILE,
    Edit,
    lock_changes,
    plan_edits,
    read_record,
    record_json,
    record_of,
)
from envbuild.resources import profiles_dir

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


def _is_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


@dataclass
class KeepPlan:
    """What a re-render does with the previous bundle's entries (paths relative to the bundle)."""

    moves: list[str]  # kept: moved whole (a file, a link or a folder) into the new tree
    lost: list[str]  # "path (why)": kept entries the new tree cannot hold


def plan_keep(old: Path, new: Path, files: dict[str, bytes]) -> KeepPlan:
    """Match the previous bundle ``old`` against the freshly written tree ``new``.

    An entry that ``new`` lacks is moved whole; a folder in both is merged entry by entry; a file render
    wrote replaces the old one; the owned folders (``app/``, ``constraints/``) are dropped.
    """
    plan = KeepPlan(moves=[], lost=[])

    def walk(rel: str) -> None:
        for entry in sorted((old / rel).iterdir() if rel else old.iterdir()):
            name = f"{rel}/{entry.name}" if rel else entry.name
            target = new / name
            if not rel and entry.name in OWNED_DIRS and _is_dir(entry):
                continue  # re-rendered whole
            if not rel and entry.name in OPTIONAL_FILES and not _is_dir(entry):
                continue  # written by this render or by none
            if not os.path.lexists(target):
                plan.moves.append(name)
            elif _is_dir(target) and _is_dir(entry):
                walk(name)
            elif name in files and not _is_dir(entry):
                continue  # a file render writes: replaced
            elif name in files:
                plan.lost.append(f"{name} (a folder where the bundle has a file)")
            else:
                plan.lost.append(f"{name} (a file or link where the bundle has a folder)")

    walk("")
    return plan


def _undo(moves: list[tuple[Path, Path]]) -> bool:
    """Move kept entries back into the previous bundle; False when one could not be moved back."""
    ok = True
    for src, dst in reversed(moves):
        try:
            os.rename(dst, src)
        except OSError:
            ok = False
    return ok


@dataclass(frozen=True, kw_only=True)
class Written:
    """What a render wrote, and what it did with the previous bundle (none: an empty or new folder)."""

    path: Path  # the bundle, absolute
    lock: str | None = None  # the previous bundle's resolved lock: "kept" | "dropped"; None: it had none
    changed: tuple[str, ...] = ()  # why the lock was dropped (inputs keys, files)
    edits: tuple[Edit, ...] = ()  # the user's entries under app/ and constraints/: kept aside or dropped
    restored: tuple[str, ...] = ()  # files render wrote, the user deleted, and this render wrote again
    recovered: tuple[str, ...] = ()  # what an interrupted render had left beside the bundle, and where it is


def write_tree(
    files: dict[str, bytes],
    out: Path,
    executable: frozenset[str] = frozenset(),
    *,
    force: bool = False,
    discard_edits: bool = False,
) -> Path:
    """Write ``files`` (relative POSIX path -> bytes) as the folder ``out``, atomically.

    Files are mode 0644 (0755 when listed in ``executable``), folders 0755, whatever the umask.  When
    ``out`` is a previous bundle, what render did not write there is kept (see :func:`plan_keep`);
    entries that cannot be kept raise :class:`BundleError` unless ``force``.
    """
    return write_bundle(files, out, executable, force=force, discard_edits=discard_edits).path


def write_bundle(
    files: dict[str, bytes],
    out: Path,
    executable: frozenset[str] = frozenset(),
    *,
    force: bool = False,
    discard_edits: bool = False,
) -> Written:
    """:func:`write_tree`, saying what it did with the previous bundle's lock and the user's edits; it
    adds render's record (:data:`envbuild.render.rerender.RECORD_FILE`) to ``files``."""
    out = out.absolute()
    prepare_out(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        message = f"{out}: cannot create the bundle folder: {exc.strerror}; choose another --out"
        raise BundleError(message) from exc
    with render_lock(out):
        recovered = recover(out)  # a render killed on its way (SIGKILL, power loss) left these
        prepare_out(out)  # again, under the lock: another render may have written it since
        written = _write_tree(files, out, executable, force, discard_edits)
        return replace(written, recovered=tuple(recovered)) if recovered else written


JOURNAL = "moves.json"  # in the .<name>.old-<suffix> folder: (from, to) of each entry moved into the new tree


def _old_for(out: Path, tmp: Path) -> Path:
    """The ``.<name>.old-<suffix>`` folder paired with the temporary tree ``.<name>.tmp-<suffix>``."""
    return out.parent / f".{out.name}.old-{tmp.name[len(f'.{out.name}.tmp-') :]}"


def _write_journal(old: Path, moves: list[tuple[str, str]]) -> None:
    """Record the moves about to be made, atomically (renamed into place) and durably, before any is made."""
    part = old / f"{JOURNAL}.part"
    with part.open("w", encoding="utf-8") as handle:
        json.dump(moves, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.rename(part, old / JOURNAL)


def _read_journal(old: Path) -> list[tuple[str, str]]:
    try:
        data = json.loads((old / JOURNAL).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []  # none written: nothing was moved yet
    return [(str(a), str(b)) for a, b in data]


def recover(out: Path) -> list[str]:
    """Finish or undo what a killed render left beside ``out`` (called under the render lock).

    ``.<name>.tmp-S`` is the new tree and ``.<name>.old-S`` holds the journal of the entries moved into it
    and, once swapped out, the previous bundle.  When ``out`` is gone and ``old/bundle`` is there, the
    render was killed between the two renames of the swap: the new tree is complete and becomes ``out``.
    Otherwise every journalled entry still in the new tree goes back to ``out``, and the new tree (render's
    files only, then) is removed.  An old folder whose bundle was swapped out holds only what render
    replaced.  Returns a line per entry put back, and per leftover that could not be settled (kept)."""
    notes: list[str] = []
    prefix = f".{out.name}.tmp-"
    for tmp in sorted(out.parent.glob(f"{glob.escape(prefix)}*")):
        old = _old_for(out, tmp)
        moves = _read_journal(old)
        if not os.path.lexists(out) and (old / "bundle").is_dir():
            os.rename(tmp, out)  # killed between the renames of the swap: finish it
            notes.append(f"finished an interrupted render: {tmp.name} became {out.name}")
            shutil.rmtree(old, ignore_errors=True)
            continue
        if not _is_dir(out):
            notes.append(f"left {tmp} as it is (an interrupted render's tree; {out} is not a bundle folder)")
            continue
        stuck = []
        for source, target in reversed(moves):
            if os.path.lexists(tmp / target) and not os.path.lexists(out / source):
                (out / source).parent.mkdir(parents=True, exist_ok=True)
                os.rename(tmp / target, out / source)
                notes.append(f"put back {source} (an interrupted render had moved it to {tmp.name})")
            elif os.path.lexists(tmp / target):
                stuck.append(target)
        if stuck:
            notes.append(f"left {tmp} as it is: {', '.join(stuck)} could not be put back (already there)")
            continue
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
    for old in sorted(out.parent.glob(f"{glob.escape(f'.{out.name}.old-')}*")):
        if not (old / "bundle").exists() or _is_dir(out):  # the swap was done: what render replaced
            shutil.rmtree(old, ignore_errors=True)
        else:
            notes.append(f"left {old} as it is (an interrupted render's previous bundle)")
    return notes


def lock_path_for(out: Path) -> Path:
    return out.parent / f".{out.name}.render-lock"


@contextlib.contextmanager
def render_lock(out: Path) -> Iterator[None]:
    """Hold the exclusive render lock of ``out``, or raise :class:`BundleError` when another holds it.

    The lock is an ``flock`` on ``.<name>.render-lock`` beside ``out``; it ends with the process that
    holds it, even one killed.  The holder removes the file before it lets go, so none is left behind; a
    render that locked a file already removed (its inode no longer at the path) locks the new one."""
    path = lock_path_for(out)
    for _ in range(100):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            message = f"{path}: cannot create the render lock: {exc.strerror}; choose another --out"
            raise BundleError(message) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise BundleError(
                f"{out}: another envbuild render is writing this bundle now (it holds {path}); nothing "
                "was changed. Let it finish, or render into another --out"
            ) from None
        try:
            current = os.stat(path)
        except FileNotFoundError:
            current = None
        if current is not None and current.st_ino == os.fstat(fd).st_ino:
            break
        os.close(fd)  # the previous holder removed it after this render opened it: lock the new one
    else:  # pragma: no cover - a hundred holders in a row
        raise BundleError(f"{out}: could not take the render lock {path}; try again")
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
        os.close(fd)


def _against_previous(
    out: Path, files: dict[str, bytes], discard_edits: bool
) -> tuple[dict[str, bytes], Written]:
    """``files`` with render's record (and the previous lock's files, when it holds), and the report."""
    record = record_of(files)
    files = {**files, RECORD_FILE: record_json(record)}
    if not is_bundle(out):
        return files, Written(path=out)
    previous = read_record(out)
    lock: str | None = None
    changed: list[str] = []
    if was_resolved(out):
        changed = lock_changes(out, files, previous, record)
        lock = "dropped" if changed else "kept"
        if not changed:
            files.update({name: (out / name).read_bytes() for name in LOCK_WRITES if name in files})
    edits, restored = plan_edits(out, files, previous, discard=discard_edits)
    kept_at = out / KEPT_EDITS
    if any(edit.kept for edit in edits) and os.path.lexists(kept_at) and not _is_dir(kept_at):
        raise BundleError(
            f"{kept_at}: is not a folder, and re-rendering keeps your edits under app/ and constraints/ "
            "there; move it away (or use --discard-edits); nothing was changed"
        )
    report = Written(
        path=out, lock=lock, changed=tuple(changed), edits=tuple(edits), restored=tuple(restored)
    )
    return files, report


def _write_tree(
    files: dict[str, bytes], out: Path, executable: frozenset[str], force: bool, discard_edits: bool
) -> Written:
    files, report = _against_previous(out, files, discard_edits)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    except OSError as exc:
        message = f"{out}: cannot create the bundle folder: {exc.strerror}; choose another --out"
        raise BundleError(message) from exc
    old: Path | None = None
    moved: list[tuple[Path, Path]] = []  # (in the previous bundle, in the new tree), done so far
    writing = out  # the path (as it would be in ``out``) being written when a write fails
    try:
        for rel, data in sorted(files.items()):
            path = tmp / rel
            writing = out / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            path.chmod(0o755 if rel in executable else 0o644)
        writing = out
        for folder in sorted({tmp, *(p for p in tmp.rglob("*") if p.is_dir())}):
            folder.chmod(0o755)
        if out.exists():
            keep = plan_keep(out, tmp, files)
            if keep.lost and not force:
                lines = "\n".join(f"  - {out / item}" for item in keep.lost)
                raise BundleError(
                    f"{out}: re-rendering would lose {len(keep.lost)} path(s) the new bundle cannot keep "
                    f"(use --force to replace them); nothing was changed:\n{lines}"
                )
            moves = [(rel, rel) for rel in keep.moves]
            moves += [(e.path.rstrip("/"), e.kept) for e in report.edits if e.kept is not None]
            old = _old_for(out, tmp)
            old.mkdir()
            _write_journal(old, moves)  # so that a render killed from here on is undone by the next
            for source, target in moves:
                (tmp / target).parent.mkdir(parents=True, exist_ok=True)
                os.rename(out / source, tmp / target)
                moved.append((out / source, tmp / target))
            os.rename(out, old / "bundle")
        os.rename(tmp, out)
    except BaseException as exc:
        if old is not None and (old / "bundle").exists() and not out.exists():
            os.rename(old / "bundle", out)  # put the previous bundle back ...
        if _undo(moved):  # ... with the entries already moved into the new tree
            shutil.rmtree(tmp, ignore_errors=True)
        else:  # never delete what could not be moved back
            message = f"{out}: cannot write the bundle, and some kept files are still in {tmp}"
            raise BundleError(message) from exc
        if isinstance(exc, OSError):
            where = f" (writing {writing})" if writing != out else ""
            raise BundleError(
                f"{out}: cannot write the bundle: {exc.strerror}{where}; nothing was changed"
                + (" (the previous bundle is as it was)" if out.exists() else "")
            ) from exc
        raise
    finally:
        if old is not None and out.exists() and not tmp.exists():  # replaced files; never the only copy
            with contextlib.suppress(OSError):
                shutil.rmtree(old)
    return report
