"""``extends``: how a profile and its parents combine, and where every setting came from.

Layers are merged from the farthest ancestor to the profile itself:

* tables merge recursively; scalars override (so every ``[base]`` and ``[accelerator]`` key, and
  ``name``/``kind``/``description``, come from the nearest file that sets them);
* ``python.packages``, ``python.requirements``, ``python.build_from_source``, ``python.allow_old``,
  ``torch.packages``, ``system.apt`` and ``validate.extensions`` APPEND (the keys with ``append`` in
  :data:`~envbuild.profile.keys.TABLES`): parent entries first, exact duplicates removed (first kept);
* every other list REPLACES (``accelerator.targets``, ``blender.devices``);
* ``[env]`` merges by key, the child's value winning;
* ``[[checks]]`` merge by ``name``: a child check replaces the parent's check of the same name in its
  position, new ones are appended.

A child may set a ``kind`` different from its parent's (``custom`` over ``pytorch``, ``pytorch`` over
``ubuntu``): ``kind`` labels the preparation (README, lock); what gets installed follows the merged
tables, so a ``[torch]`` table inherited by a ``kind = "ubuntu"`` child is still installed.  ``extends``
names one parent, so the chain is linear: a file reached twice is a cycle (an error naming the chain).

The result records, for each leaf key path, its origin: ``profile:<file>`` (the profile itself),
``extends:<file>`` (a parent), or ``default``; an appended list that several files contributed to names
them all, comma-separated, nearest last.  ``owner`` and ``item_owner`` keep the layer index behind each
key and each appended entry; the loader turns them into ``Profile.origins`` (the file's profile name
and path per key, ``torch.packages[0]`` per entry), which messages use to say a value was inherited.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from envbuild.profile.schema import TABLES

# Both derived from the one definition of the profile's keys (:data:`envbuild.profile.schema.TABLES`).
APPEND = frozenset(
    (table, key) for table, specs in TABLES.items() for key, spec in specs.items() if spec.append
)

# Every leaf key of a profile with a model default, for "default" provenance.
DEFAULT_LEAVES = ("description", *(f"{table}.{key}" for table, specs in TABLES.items() for key in specs))


@dataclass
class Merged:
    data: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    owner: dict[str, int] = field(default_factory=dict)  # leaf key -> index of the layer that set it
    item_owner: dict[str, list[int]] = field(default_factory=dict)  # appended list -> layer per entry


def _note(merged: Merged, key: str, origin: str, index: int, *, append: bool = False) -> None:
    previous = merged.sources.get(key)
    if append and previous and previous != origin:
        parts = [p for p in previous.split(", ") if p != origin]
        merged.sources[key] = ", ".join([*parts, origin])
    else:
        merged.sources[key] = origin
    merged.owner[key] = index


def merge(layers: list[tuple[str, dict[str, Any]]]) -> Merged:
    """Merge clean documents, farthest ancestor first; ``layers`` holds (origin, document)."""
    merged = Merged()
    for index, (origin, doc) in enumerate(layers):
        for key, value in doc.items():
            if key == "env":
                table = merged.data.setdefault("env", {})
                for name, text in value.items():
                    table[name] = text
                    _note(merged, f"env.{name}", origin, index)
            elif key == "checks":
                checks: list[dict[str, Any]] = merged.data.setdefault("checks", [])
                for check in value:
                    names = [c["name"] for c in checks]
                    if check["name"] in names:
                        checks[names.index(check["name"])] = check
                    else:
                        checks.append(check)
                    _note(merged, f"checks.{check['name']}", origin, index)
            elif isinstance(value, dict):
                table = merged.data.setdefault(key, {})
                for sub, item in value.items():
                    path = f"{key}.{sub}"
                    if (key, sub) in APPEND:
                        current: list[str] = table.setdefault(sub, [])
                        owners = merged.item_owner.setdefault(path, [])
                        for entry in item:
                            if entry not in current:
                                current.append(entry)
                                owners.append(index)
                        _note(merged, path, origin, index, append=True)
                    else:
                        table[sub] = item
                        _note(merged, path, origin, index)
            else:
                merged.data[key] = value
                _note(merged, key, origin, index)
    for leaf in DEFAULT_LEAVES:
        merged.sources.setdefault(leaf, "default")
    return merged
