"""``-c``/``--constraint`` files named in the profile's requirement files travel with the bundle.

The loader keeps a constraint as an option line ``-c path`` (relative to the requirement file that
names it, inside the profile's folder) with the origin ``<file>:<line>``.  Render copies each one to
``constraints/<NN>-<name>`` in the bundle and points ``requirements-rebuild.txt`` at that copy
(pip resolves it relative to the requirements file, on the host for ``envbuild fetch`` and in the
builder stage alike).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from envbuild.errors import BundleError
from envbuild.models import Plan, RequirementLine
from envbuild.resources import profiles_dir

CONSTRAINT_OPTIONS = frozenset({"-c", "--constraint"})


@dataclass(frozen=True)
class Constraint:
    origin: str
    declared: str  # the path as written
    bundle_path: str  # "constraints/01-constraints.txt", relative to the bundle
    data: bytes


def constraint_value(line: RequirementLine) -> str | None:
    if line.kind != "option":
        return None
    words = shlex.split(line.text)
    if len(words) == 2 and words[0] in CONSTRAINT_OPTIONS:
        return words[1]
    if len(words) == 1 and words[0].startswith("--constraint="):
        return words[0].split("=", 1)[1]
    return None


def _source_file(plan: Plan, origin: str) -> tuple[Path, Path]:
    """(the requirement file that named the constraint, the folder it must stay inside)."""
    source = origin.rpartition(":")[0]
    if source.startswith("builtin:"):
        return profiles_dir() / source.removeprefix("builtin:"), profiles_dir()
    base = Path(plan.profile.folder) if plan.profile.folder else profiles_dir()
    return base / source, base


def collect_constraints(plan: Plan) -> tuple[Constraint, ...]:
    found: list[Constraint] = []
    for line in plan.requirements:
        value = constraint_value(line)
        if value is None:
            continue
        source, base = _source_file(plan, line.origin)
        path = (source.parent / value).resolve()
        root = base.resolve()
        if root not in path.parents or not path.is_file():
            raise BundleError(
                f"{line.origin}: constraints file {value!r} not found inside {root} (looked at {path})"
            )
        name = f"constraints/{len(found) + 1:02d}-{path.name}"
        found.append(Constraint(origin=line.origin, declared=value, bundle_path=name, data=path.read_bytes()))
    return tuple(found)
