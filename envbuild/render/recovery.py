"""Settling what a render killed on its way left beside ``out``.

A render killed on its way (SIGKILL, power loss) hides nothing: before moving any kept entry it writes
the list of moves (``moves.json``, fsynced) into ``.<name>.old-<suffix>``, paired with the new tree
``.<name>.tmp-<suffix>``; the next render, under the lock, first finishes the swap (when the new tree is
complete and ``out`` is gone) or moves every listed entry back, and says so (:func:`recover`).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
from pathlib import Path

from envbuild import atomic
from envbuild.render.previous import real_dir

JOURNAL = "moves.json"  # in the .<name>.old-<suffix> folder: (from, to) of each entry moved into the new tree


def old_for(out: Path, tmp: Path) -> Path:
    """The ``.<name>.old-<suffix>`` folder paired with the temporary tree ``.<name>.tmp-<suffix>``."""
    return out.parent / f".{out.name}.old-{tmp.name[len(f'.{out.name}.tmp-') :]}"


def write_journal(old: Path, moves: list[tuple[str, str]]) -> None:
    """Record the moves about to be made, atomically (renamed into place) and durably, before any is made."""
    atomic.write_text(old / JOURNAL, json.dumps(moves))


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
        old = old_for(out, tmp)
        moves = _read_journal(old)
        if not os.path.lexists(out) and (old / "bundle").is_dir():
            os.rename(tmp, out)  # killed between the renames of the swap: finish it
            notes.append(f"finished an interrupted render: {tmp.name} became {out.name}")
            shutil.rmtree(old, ignore_errors=True)
            continue
        if not real_dir(out):
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
        if not (old / "bundle").exists() or real_dir(out):  # the swap was done: what render replaced
            shutil.rmtree(old, ignore_errors=True)
        else:
            notes.append(f"left {old} as it is (an interrupted render's previous bundle)")
    return notes
