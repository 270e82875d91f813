"""The default torch is a preference, not a pin.

A ``kind = "pytorch"`` profile without ``torch.version`` (and without a torch line) gets the catalog's
newest confirmed torch (``I-TORCH-DEFAULT``).  When the resolution with that pin fails, or locks a package
many series behind its newest (``E-OLD-RELEASE``), :func:`envbuild.lock.replan.resolve_and_replan`
resolves again with torch left to the resolver within the releases the catalog confirms
(``torch>=OLDEST,<=DEFAULT``, :func:`relaxed_lock`); the companions the profile names are left unpinned
(the plan pairs them with the torch that is locked).  The plan then follows the locked torch, as for any
torch a dependency brings in, and ``I-TORCH-DEFAULT-YIELDED`` says which requirement constrained it.
"""

from __future__ import annotations

import re
from dataclasses import replace

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from envbuild.catalog import load_catalog
from envbuild.lock.honest import uv_reason
from envbuild.lock.target import Target
from envbuild.models import CheckResult, Finding, Lock, Plan, RequirementLine
from envbuild.plan.resolved import ResolvedTorch
from envbuild.render.lockfile import PIN_FAMILY, PIN_ORIGIN, is_pin_origin

DEFAULT_CODE = "I-TORCH-DEFAULT"
# uv's "vllm==0.33.0 depends on torch<=2.14.0": who constrained torch, and how
_WHO = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\S*) requires torch")
_ON_TORCH = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)((?:==|>=|<=|!=|<|>)\S+?)? depends on torch(\S+)")


def defaulted(result: CheckResult) -> bool:
    """The plan's torch is the pytorch kind's default (the profile declares no torch)."""
    return result.plan.torch_version is not None and any(f.code == DEFAULT_CODE for f in result.findings)


def catalog_span(default: str) -> str:
    """``torch>=OLDEST,<=DEFAULT``: the releases the catalog confirms, up to the default."""
    confirmed = [
        Version(patch.version)
        for release in load_catalog().releases
        if release.status == "ga"
        for patch in release.patch
        if patch.tier != "unconfirmed"
    ]
    oldest = min(confirmed, default=Version(default))
    return f"torch>={oldest},<={default}"


def relaxed_lock(lock: Lock, plan: Plan) -> Lock:
    """``lock`` with its torch pin widened to :func:`catalog_span` and the other family pins dropped
    (a companion the profile names in torch.packages stays, unpinned)."""
    assert plan.torch_version is not None
    named = set()
    for text in plan.profile.torch.packages:
        named.add(str(canonicalize_name(re.split(r"[\s\[<>=!~;@]", text.strip(), maxsplit=1)[0])))
    lines: list[RequirementLine] = []
    for line in lock.declared:
        if line.kind != "requirement" or not line.name or not is_pin_origin(line.origin):
            lines.append(line)
        elif canonicalize_name(line.name) == "torch":
            lines.append(replace(line, text=catalog_span(plan.torch_version)))
        elif str(canonicalize_name(line.name)) in named:
            lines.append(replace(line, text=str(canonicalize_name(line.name))))
    return replace(lock, declared=tuple(lines))


def torch_requirements(text: str) -> list[str]:
    """What uv's explanation says constrains torch: ``vllm 0.33.0 requires torch<=2.14.0``, each once."""
    found: dict[tuple[str, str], str] = {}  # (package, torch's range) -> the first way uv put it
    for match in _ON_TORCH.finditer(text):
        who, which, spec = match.group(1), match.group(2) or "", match.group(3).rstrip(".,);")
        if canonicalize_name(who) == "torch":
            continue
        shown = f"{who} {which[2:]}" if which.startswith("==") else f"{who}{which}"
        found.setdefault((str(canonicalize_name(who)), spec), f"{shown} requires torch{spec}")
    return list(found.values())


def constraints_on_torch(findings: tuple[Finding, ...], locked: dict[str, str] | None = None) -> list[str]:
    """:func:`torch_requirements` over the first resolution's findings; with ``locked`` (name ->
    version of the resolution that yielded), only the ranges that hold the release locked (uv's chain
    also names every older release it tried)."""
    found = list(dict.fromkeys(r for f in findings for r in torch_requirements(f.message)))
    if locked is None:
        return found
    kept = []
    for text in found:
        match = _WHO.match(text)
        if match is None or str(canonicalize_name(match.group(1))) not in locked:
            continue
        which = match.group(2).strip()
        have = Version(locked[str(canonicalize_name(match.group(1)))])
        try:
            spec = SpecifierSet(f"=={which}" if which and which[0].isdigit() else which)
        except InvalidSpecifier:
            continue
        if spec.contains(have, prereleases=True):
            kept.append(text)
    return kept or found[:3]


def yielded_origin(default: str, torch: ResolvedTorch) -> str:
    """The lock's provenance of a torch pin that the default yielded to."""
    by = ", ".join(b for b in torch.brought_by if not is_pin_origin(b)) or "a dependency"
    return (
        f"{PIN_FAMILY}: torch {torch.version}, chosen by the resolver within the catalog's releases "
        f"({catalog_span(default)}, required by {by}): the default torch {default} does not install with "
        "the profile's requirements; the profile declares no torch.version"
    )


def yielded_finding(
    default: str, torch: ResolvedTorch, first: tuple[Finding, ...], locked: dict[str, str] | None = None
) -> Finding:
    why = constraints_on_torch(first, locked)
    first_error = next((f for f in first if f.severity == "error"), None)
    cause = (
        "; ".join(why)
        if why
        else (f"{first_error.code}: {first_error.message}" if first_error else "the profile's requirements")
    )
    return Finding(
        severity="info",
        code="I-TORCH-DEFAULT-YIELDED",
        message=(
            f'the default torch {default} (kind = "pytorch" without torch.version) does not install with the '
            f"profile's requirements ({cause}); the resolver chose torch {torch.version} within the "
            f"catalog's releases ({catalog_span(default)}), required by "
            f"{', '.join(b for b in torch.brought_by if not is_pin_origin(b)) or 'a dependency'}, and the "
            "plan follows it; set torch.version "
            "to pin a release"
        ),
    )


def declared_torch_conflict(cause: str, lock: Lock, target: Target) -> Finding | None:
    """A declared torch.version that a requirement excludes: both sides, on one line."""
    pin = next((line for line in lock.declared if line.origin == PIN_ORIGIN and line.name == "torch"), None)
    if pin is None or (f"you require {pin.text}" not in cause and f"require {pin.text}" not in cause):
        return None
    sides = torch_requirements(cause)
    if not sides:
        return None
    declared = pin.text.split("==", 1)[-1]
    return Finding(
        severity="error",
        code="E-REQ-CONFLICT",
        message=(
            f"{'; '.join(sides)}; the profile declares torch.version {declared}: set "
            "torch.version to a release those requirements allow, or remove it to let the resolver choose "
            f"within the catalog's releases (uv, for {target.describe()}: {uv_reason(cause)})"
        ),
    )


__all__ = [
    "catalog_span",
    "constraints_on_torch",
    "declared_torch_conflict",
    "defaulted",
    "relaxed_lock",
    "torch_requirements",
    "yielded_finding",
    "yielded_origin",
]
