"""``-c``/``--constraint`` files named in the profile's requirement files travel with the bundle.

The loader keeps a constraint as an option line ``-c path`` (relative to the requirement file that
names it, inside the profile's folder) with the origin ``<file>:<line>``.  Render copies each one to
``constraints/<NN>-<name>`` in the bundle and points ``requirements-rebuild.txt`` at that copy
(pip resolves it relative to the requirements file, on the host for ``envbuild fetch`` and in the
builder stage alike).

The copy holds what envbuild checked, and nothing else: the file is read again with the loader's parser
(:func:`envbuild.profile.requirements.parse_file`, as a constraints file) and written back one normalised
line each (``name<3``, ``name==1 --hash=sha256:...``, ``--only-binary :all:``), without the comments,
blank lines and continuations of the original.  A problem the loader would report (a secret on any line,
a comment's too) is refused here as well.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from envbuild.errors import BundleError, Issue
from envbuild.models import Plan, RequirementLine
from envbuild.profile.paths import root_place
from envbuild.profile.requirements import parse_file
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
        data = _normalised(path, line.origin)
        found.append(Constraint(origin=line.origin, declared=value, bundle_path=name, data=data))
    return tuple(found)


def _normalised(path: Path, origin: str) -> bytes:
    """The constraints file at ``path`` as its checked lines, one each, LF-terminated."""
    issues: list[Issue] = []
    lines = parse_file(
        root_place(path, str(path)),
        key="constraints file",
        issues=issues,
        on_file=lambda place, data: None,
        constraints=True,
    )
    if issues:
        problems = "\n".join(f"  - {issue}" for issue in issues)
        raise BundleError(f"{origin}: constraints file {path} is not valid:\n{problems}")
    text = [" ".join([line.text, *(f"--hash={digest}" for digest in line.hashes)]) for line in lines]
    return "".join(f"{line}\n" for line in text).encode("utf-8")
