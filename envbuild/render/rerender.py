"""Re-rendering into a previous bundle: which of its lock still holds, and what the user changed.

``envbuild.rendered.json`` is render's record of what it wrote, read by the next render (no time, no
path: equal inputs give equal bytes)::

    {"format": "envbuild.rendered/1",
     "resolver_input": {the unresolved lock's python_version, os, declared, index_urls, constraint_files},
     "written": {"app/src/main.py": "<sha256>", "constraints/01-c.txt": "<sha256>", ...}}

**The lock.**  A previous bundle whose lock ``envbuild lock`` resolved keeps it (requirements-rebuild.txt,
envbuild.lock.json, Dockerfile, README.md, docker-bake.hcl, byte for byte as lock left them) when
:func:`lock_changes` finds nothing: the new ``envbuild.inputs.json`` is byte-identical to the old one, the
new unresolved lock's resolver input equals the recorded one (a newer envbuild or catalog that declares
something else is a change), the constraint copies' bytes are those in the bundle, this envbuild's version
is the one that wrote the lock, and every file lock wrote is there.  Anything else drops the lock, and the
change is named: inputs keys (``python.lines``, ``targets``), resolver fields (``lock.declared``), files
(``constraints/01-c.txt``).

**The user's edits.**  Render rewrites ``app/`` and ``constraints/`` whole.  An entry there that render
did not write, or that changed since it wrote it (its sha256 differs from the record), is the user's:
left in place when the new render writes the very same bytes, otherwise moved to ``kept-edits/<path>``
(``<path>.~2~``, ``.~3~`` ... when that name is taken), a folder render never owns and the build
context ignores, or dropped with ``--discard-edits``.  Without a record (a bundle rendered by an older
envbuild) every entry the new render does not write identically is the user's.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envbuild import __version__
from envbuild.digest import sha256_file
from envbuild.filestream import Content, content_sha256
from envbuild.models import INPUTS_FILE

RECORD_FILE = "envbuild.rendered.json"
RECORD_FORMAT = "envbuild.rendered/1"
KEPT_EDITS = "kept-edits"
LOCK_FILE = "envbuild.lock.json"
# What `envbuild lock` writes (envbuild.lock.lock_bundle); docker-bake.hcl only with render --bake.
LOCK_WRITES = ("requirements-rebuild.txt", LOCK_FILE, "Dockerfile", "README.md", "docker-bake.hcl")
# The unresolved lock's fields the resolver reads (envbuild.lock.resolve): its input, as declared.
RESOLVER_KEYS = ("python_version", "os", "declared", "index_urls", "constraint_files")
# The folders render rewrites whole from the profile ([app] source, the -c files).
REWRITTEN = ("app", "constraints")
# Inputs that follow from others (the regenerate command; the profile's digest and provenance): named
# only when nothing else changed.
DERIVED = frozenset({"command", "sha256", "sources", "origins"})
_ABOUT = "what envbuild render wrote here, read by the next render (keep it)"


def _is_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _is_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def _rewritten(rel: str) -> bool:
    return "/" in rel and rel.split("/", 1)[0] in REWRITTEN


def _rendered(files: dict[str, Content], name: str) -> bytes | None:
    """A file render generated (never an app file's copy), or None when ``files`` lacks it."""
    data = files.get(name)
    return data if isinstance(data, bytes) else None


def record_of(files: dict[str, Content]) -> dict[str, Any]:
    """The record of a render that writes ``files`` (its unresolved lock among them)."""
    lock_bytes = _rendered(files, LOCK_FILE)
    lock = json.loads(lock_bytes) if lock_bytes is not None else {}
    return {
        "about": _ABOUT,
        "format": RECORD_FORMAT,
        "resolver_input": {key: lock.get(key) for key in RESOLVER_KEYS},
        "written": {rel: content_sha256(data) for rel, data in sorted(files.items()) if _rewritten(rel)},
    }


def record_json(record: dict[str, Any]) -> bytes:
    """Sorted keys, indent 2, LF, trailing newline: equal renders give equal bytes."""
    return (json.dumps(record, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def read_record(bundle: Path) -> dict[str, Any] | None:
    """The previous render's record, or None when there is none or it does not read as one."""
    try:
        data = json.loads((bundle / RECORD_FILE).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != RECORD_FORMAT:
        return None
    written, resolver = data.get("written"), data.get("resolver_input")
    if not isinstance(resolver, dict) or not isinstance(written, dict):
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in written.items()):
        return None
    return data


_ABSENT = object()


def changed_keys(old: Any, new: Any, key: str = "") -> list[str]:
    """The dotted keys where two JSON values differ: tables are compared key by key, anything else
    (a list, a string, a number) whole, under its own key."""
    if isinstance(old, dict) and isinstance(new, dict):
        changed: list[str] = []
        for name in sorted(old.keys() | new.keys()):
            sub = f"{key}.{name}" if key else str(name)
            changed += changed_keys(old.get(name, _ABSENT), new.get(name, _ABSENT), sub)
        return changed
    return [] if old == new else [key or "(the whole file)"]


def input_changes(old: bytes, new: bytes) -> tuple[list[str], list[str]]:
    """What differs between two ``envbuild.inputs.json``: the profile's keys as the profile names them
    (``python.lines``, ``torch.version``), render's own by name (``targets``, ``days``, ``bake``); then,
    apart, the derived ones (:data:`DERIVED`, by their first part)."""
    try:
        keys = changed_keys(json.loads(old), json.loads(new))
    except ValueError:
        return [INPUTS_FILE], []
    names = [key.removeprefix("profile.") for key in keys]
    plain = [name for name in names if name.split(".", 1)[0] not in DERIVED]
    derived = [name.split(".", 1)[0] for name in names if name.split(".", 1)[0] in DERIVED]
    return plain, list(dict.fromkeys(derived))


def _digests(folder: Path, prefix: str) -> dict[str, str | None]:
    """Every entry under ``folder`` that is not a folder: its sha256 (None for a link or a special file)."""
    found: dict[str, str | None] = {}
    if not _is_dir(folder):
        return found
    for root, dirs, names in os.walk(folder):
        base = Path(root)
        rel = base.relative_to(folder).as_posix()
        at = prefix if rel == "." else f"{prefix}/{rel}"
        for name in [*names, *(d for d in dirs if (base / d).is_symlink())]:
            path = base / name
            found[f"{at}/{name}"] = sha256_file(path) if _is_file(path) else None
    return found


def lock_changes(
    old: Path, files: dict[str, Content], old_record: dict[str, Any] | None, new_record: dict[str, Any]
) -> list[str]:
    """Why the resolved lock of the previous bundle ``old`` does not hold for a render of ``files``
    (empty: it holds, see the module doc)."""
    changed: list[str] = []
    derived: list[str] = []  # named only when nothing else is
    inputs = old / INPUTS_FILE
    previous = inputs.read_bytes() if _is_file(inputs) else None
    if previous is None:
        changed.append(f"{INPUTS_FILE} (the previous bundle has none)")
    elif previous != _rendered(files, INPUTS_FILE):
        changed, derived = input_changes(previous, _rendered(files, INPUTS_FILE) or b"")
    if old_record is None:
        changed.append(f"{RECORD_FILE} (the previous bundle has none: rendered by an older envbuild)")
    elif not changed:  # the same inputs, declared differently: a newer envbuild or catalog
        before, after = old_record["resolver_input"], new_record["resolver_input"]
        changed += [f"lock.{key}" for key in changed_keys(before, after)]
    new_constraints = {
        rel: content_sha256(data) for rel, data in files.items() if rel.startswith("constraints/")
    }
    old_constraints = _digests(old / "constraints", "constraints")
    for rel in sorted(new_constraints.keys() | old_constraints.keys()):
        if rel not in old_constraints or new_constraints.get(rel) != old_constraints[rel]:
            changed.append(rel)
    try:
        locked_by = json.loads((old / LOCK_FILE).read_bytes()).get("envbuild_version")
    except (OSError, ValueError, AttributeError):
        locked_by = None
    if locked_by != __version__:
        changed.append(f"envbuild version {locked_by} -> {__version__}")
    changed += [f"{name} (missing)" for name in LOCK_WRITES if name in files and not _is_file(old / name)]
    return changed or derived


@dataclass(frozen=True, kw_only=True)
class Edit:
    """An entry under ``app/`` or ``constraints/`` that the user changed (paths relative to the bundle)."""

    path: str  # "app/src/main.py"; a folder ends with "/"
    why: str  # "edited" | "added" | "not as this render writes it"
    kept: str | None  # where it was moved ("kept-edits/app/src/main.py"); None: dropped (--discard-edits)


def plan_edits(
    old: Path, files: dict[str, Content], record: dict[str, Any] | None, *, discard: bool
) -> tuple[list[Edit], list[str]]:
    """The user's entries under the previous bundle's ``app/`` and ``constraints/`` (see the module doc),
    and the files render wrote there that the user deleted and the new render writes again."""
    written: dict[str, str] | None = record["written"] if record is not None else None
    owned = set(files) | set(written or ())
    edits: list[Edit] = []
    taken: set[str] = set()

    def destination(rel: str) -> str | None:
        if discard:
            return None
        base = candidate = f"{KEPT_EDITS}/{rel}"
        n = 1
        while candidate in taken or os.path.lexists(old / candidate):
            n += 1
            candidate = f"{base}.~{n}~"
        taken.add(candidate)
        return candidate

    def walk(rel: str) -> None:
        for entry in sorted((old / rel).iterdir(), key=lambda p: p.name):
            name = f"{rel}/{entry.name}"
            if _is_dir(entry):
                if any(path.startswith(f"{name}/") for path in owned):
                    walk(name)
                elif any(entry.iterdir()):  # a folder render never wrote into
                    edits.append(Edit(path=f"{name}/", why="added", kept=destination(name)))
                continue
            ours = written.get(name) if written is not None else None
            if _is_file(entry):
                digest = sha256_file(entry)
                new = files.get(name)
                if (new is not None and content_sha256(new) == digest) or ours == digest:
                    continue  # the new render writes these very bytes, or render wrote them last time
            why = (
                "edited"
                if ours is not None
                else "added"
                if written is not None
                else "not as render writes it"
            )
            edits.append(Edit(path=name, why=why, kept=destination(name)))

    for top in REWRITTEN:
        if _is_dir(old / top):
            walk(top)
    restored = sorted(rel for rel in written or () if rel in files and not os.path.lexists(old / rel))
    return edits, restored
