"""Why the resolver did not choose the newest release of a package the profile names.

After a successful resolution, each package the profile names directly (its requirement lines, not the
torch-family pins) is compared with the newest release the indexes serve with a file the target installs
(:mod:`envbuild.lock.releases`) and that the profile's own specifiers for it admit.  When the locked
release is older, uv is asked again with ``NAME>=NEWEST`` added (same target, indexes, constraints and
options), and its explanation is quoted on one line:

- ``W-NEWEST-SKIPPED``: the locked release is in the newest series, or the one before it;
- ``E-OLD-RELEASE``: it is more than one series behind (a series is a (major, minor) pair, counted over
  the series the index serves: :func:`envbuild.lock.releases.series_behind`), unless the profile lists
  the package in ``[python] allow_old`` (then ``W-NEWEST-SKIPPED``).  A profile that bounds the package
  (``vllm<0.3``) is compared with the newest release its bound admits, so it is never refused for it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envbuild.lock.releases import series, series_behind, served
from envbuild.lock.target import Target
from envbuild.lock.uv import ResolverFailed, Sources, run_uv
from envbuild.models import Finding, Lock, LockedDistribution, RequirementLine
from envbuild.render.lockfile import is_pin_origin

_HEADER = re.compile(r"^(?:error: )?No solution found when resolving dependencies:?\s*")
_CAUSE = re.compile(r"\bcause:\s*")


def uv_reason(text: str) -> str:
    """uv's explanation on one line, without its ``error: No solution found`` header."""
    flat = " ".join(text.split())
    return _CAUSE.sub("", _HEADER.sub("", flat), count=1).strip().rstrip(".")


def direct_lines(lock: Lock) -> dict[str, list[RequirementLine]]:
    """The profile's own requirement lines by canonical name (the torch-family pins left out)."""
    found: dict[str, list[RequirementLine]] = {}
    for line in lock.declared:
        if line.kind == "requirement" and line.name and not is_pin_origin(line.origin):
            found.setdefault(str(canonicalize_name(line.name)), []).append(line)
    return found


def profile_bound(lines: Iterable[RequirementLine]) -> SpecifierSet:
    """Every specifier the profile's lines put on a package, together."""
    spec = SpecifierSet()
    for line in lines:
        try:
            spec &= Requirement(line.text).specifier
        except InvalidRequirement:
            continue
    return spec


def ask_newest(name: str, newest: Version, input_text: str, command: list[str], work: Path) -> str | None:
    """uv's explanation of why ``name>=newest`` cannot be added (one line); None when uv finds a
    resolution with it (the resolver preferred another release, but the newest installs too)."""
    folder = work / f"newest-{name}"
    folder.mkdir(exist_ok=True)
    wanted = folder / "requirements.in"
    wanted.write_text(f"{input_text}{name}>={newest}\n", encoding="utf-8")
    try:
        run_uv(command, wanted, folder)
    except ResolverFailed as failed:
        return uv_reason(failed.text)
    return None


def newest_findings(
    lock: Lock,
    dists: Iterable[LockedDistribution],
    *,
    input_text: str,
    command: list[str],
    work: Path,
    target: Target,
    sources: Sources,
    floors: dict[str, Version] | None = None,
) -> list[Finding]:
    """W-NEWEST-SKIPPED / E-OLD-RELEASE for each directly named package locked behind the newest;
    ``floors`` gets, for each E-OLD-RELEASE, the oldest release at most one series behind the newest (the
    resolver is asked again with ``NAME>=FLOOR``: :func:`envbuild.lock.resolve.resolve`)."""
    locked = {d.name: d for d in dists if d.in_image}
    allow_old = {str(canonicalize_name(n)) for n in lock.allow_old}
    findings: list[Finding] = []
    for name, lines in direct_lines(lock).items():
        dist = locked.get(name)
        if dist is None:
            continue
        try:
            have = Version(dist.version)
        except InvalidVersion:
            continue
        releases = served(name, sources, target, name in lock.build_from_source)
        newest = releases.newest(profile_bound(lines))
        if newest is None or newest <= have:
            continue
        behind = series_behind(have, newest, releases.installable)
        reason = ask_newest(name, newest, input_text, command, work)
        why = (
            f"uv, asked for {name}>={newest}: {reason}"
            if reason is not None
            else f"uv finds a resolution with {name} {newest} too when asked for it: add "
            f"`{name}>={newest}` to the requirements to get it"
        )
        where = "; ".join(f"{line.origin}: {line.text}" for line in lines)
        head = (
            f"{name} ({where}) is locked at {have}, not {newest}, the newest release the indexes serve for "
            f"{target.describe()}"
        )
        if behind > 1 and name not in allow_old:
            window = sorted({series(v) for v in releases.installable if v <= newest})[-2:]
            if floors is not None:
                floors[name] = min(v for v in releases.installable if series(v) in window)
            findings.append(
                Finding(
                    severity="error",
                    code="E-OLD-RELEASE",
                    message=(
                        f"{head}: {behind} series behind it. {why}. Bound it in the profile "
                        f'(`{name}<{have.major}.{have.minor + 1}`) or add `[python] allow_old = ["{name}"]` '
                        "to accept the old release, or change what keeps the newest out"
                    ),
                )
            )
        else:
            findings.append(Finding(severity="warning", code="W-NEWEST-SKIPPED", message=f"{head}. {why}"))
    return findings


__all__ = ["ask_newest", "direct_lines", "newest_findings", "profile_bound", "uv_reason"]
