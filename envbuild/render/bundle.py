"""Write a bundle atomically: everything is rendered in memory, written to a temporary folder beside
``out``, then swapped in.  Any other non-empty folder is refused.

Re-rendering into a previous bundle replaces what render owns (the files it writes, and the whole
``app/`` and ``constraints/`` folders) and keeps everything else: the fetched ``wheelhouse/`` and
``tools/``, ``certs/``, build logs and records, the user's notes.  Kept entries are moved (renamed, never
copied) into the new tree before the swap, and moved back when the swap fails.  A kept entry that the
new render cannot hold (a folder where render writes a file, a file or link where it needs a folder) is
refused, naming every such path, unless ``force`` is set, which replaces it.  A resolved lock whose
inputs did not change is kept, and the user's edits under ``app/`` and ``constraints/`` are moved to
``kept-edits/`` (or dropped with ``discard_edits``): see :mod:`envbuild.render.rerender`.  Which
folder is a previous bundle, and what of it is kept, is :mod:`envbuild.render.previous`.

A render killed on its way (SIGKILL, power loss) hides nothing (:mod:`envbuild.render.recovery`), and
two renders into the same folder at once cannot both write it (:mod:`envbuild.render.render_lock`).  A
write that fails (a full disk: ENOSPC, EFBIG) names the file and leaves ``out`` as it was, with no
temporary folder behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from envbuild.errors import BundleError
from envbuild.filestream import Content, write_content
from envbuild.models import Profile
from envbuild.render.previous import is_bundle, plan_keep, prepare_out, real_dir, was_resolved
from envbuild.render.quote import check_generated
from envbuild.render.recovery import old_for, recover, write_journal
from envbuild.render.render_lock import render_lock
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


def app_source(profile: Profile) -> Path | None:
    if not profile.app.source:
        return None
    base = Path(profile.folder) if profile.folder else profiles_dir()
    root = (base / profile.app.source).resolve()
    if not root.is_dir():
        raise BundleError(f"{profile.path}: app.source: {profile.app.source!r} is not a folder ({root})")
    return root


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
    skipped: tuple[str, ...] = ()  # folders of the app source not copied: bundles ("old/b1/ (why)")


def write_tree(
    files: dict[str, Content],
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
    files: dict[str, Content],
    out: Path,
    executable: frozenset[str] = frozenset(),
    *,
    force: bool = False,
    discard_edits: bool = False,
) -> Written:
    """:func:`write_tree`, saying what it did with the previous bundle's lock and the user's edits; it
    adds render's record (:data:`envbuild.render.rerender.RECORD_FILE`) to ``files``.

    Each generated text file is looked at once more first (:func:`envbuild.render.quote.check_generated`):
    a line break by Python's rules other than LF in one is refused, with nothing written."""
    check_generated({name: data for name, data in files.items() if isinstance(data, bytes)})
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


def _against_previous(
    out: Path, files: dict[str, Content], discard_edits: bool
) -> tuple[dict[str, Content], Written]:
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
    if any(edit.kept for edit in edits) and os.path.lexists(kept_at) and not real_dir(kept_at):
        raise BundleError(
            f"{kept_at}: is not a folder, and re-rendering keeps your edits under app/ and constraints/ "
            "there; move it away (or use --discard-edits); nothing was changed"
        )
    report = Written(
        path=out, lock=lock, changed=tuple(changed), edits=tuple(edits), restored=tuple(restored)
    )
    return files, report


def _write_tree(
    files: dict[str, Content], out: Path, executable: frozenset[str], force: bool, discard_edits: bool
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
            write_content(path, data)
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
            old = old_for(out, tmp)
            old.mkdir()
            write_journal(old, moves)  # so that a render killed from here on is undone by the next
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
