"""Pure decisions: facts (from probes, tools, recorded fixtures) + the lock -> a stage result.

Nothing here runs a process or imports torch, so recorded facts from real machines can be fed to the
same code that decides on a live machine.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envbuild.models import Lock, LockedDistribution
from envbuild.validate.model import StageResult


def result(stage: str, error: str | None = None, hint: str | None = None, /, **facts: Any) -> StageResult:
    return StageResult(
        stage=stage, status="failed" if error else "passed", facts=facts, error=error, hint=hint
    )


def skipped(stage: str, reason: str, /, **facts: Any) -> StageResult:
    return StageResult(stage=stage, status="skipped", facts={"reason": reason, **facts})


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text))


# -- interpreter ------------------------------------------------------------------------------------


def decide_interpreter(lock: Lock, facts: dict[str, Any]) -> StageResult:
    problems = []
    version = str(facts.get("version", ""))
    if version.split(".")[:2] != lock.python_version.split(".")[:2]:
        problems.append(f"Python {version} is running; the lock declares Python {lock.python_version}")
    declared = lock.python_executable
    parent = os.path.dirname(declared)
    if os.path.basename(parent) == "bin":
        want_prefix = os.path.realpath(os.path.dirname(parent))
        got_prefix = os.path.realpath(str(facts.get("prefix", "")))
        if want_prefix != got_prefix:
            problems.append(f"interpreter prefix {got_prefix} is not the lock's environment {want_prefix}")
    if not problems:
        return result("interpreter", **facts)
    return result(
        "interpreter",
        "; ".join(problems),
        f"run the workload with {declared} (e.g. PATH={parent}:$PATH), or pass --python to validate another",
        **facts,
    )


# -- os ---------------------------------------------------------------------------------------------


def decide_os(lock: Lock, facts: dict[str, Any]) -> StageResult:
    shown = {k: v for k, v in facts.items() if k != "os_release"}
    problems = []
    got = f"{facts.get('id')} {facts.get('version_id')}"
    if (facts.get("id"), facts.get("version_id")) != (lock.os_release_id, lock.os_release_version):
        problems.append(f"OS is {got}; the lock declares {lock.os_release_id} {lock.os_release_version}")
    libc = str(facts.get("libc_version") or "")
    if lock.torch_version and facts.get("libc") == "glibc" and libc and version_tuple(libc) < (2, 28):
        problems.append(f"glibc {libc} is older than 2.28, which torch wheels (manylinux_2_28) need")
    if not problems:
        return result("os", **shown)
    return result(
        "os", "; ".join(problems), f"use the image built from the bundle ({lock.base_image})", **shown
    )


# -- packages ---------------------------------------------------------------------------------------


def _split_local(version: str) -> tuple[str, str | None]:
    public, _, local = version.partition("+")
    return public, local or None


def package_differences(lock: Lock, installed: dict[str, str]) -> list[str]:
    """Every difference between the lock's packages and ``installed`` (canonical name -> version)."""
    diffs: list[str] = []
    for pkg in lock.packages:
        key = canonicalize_name(pkg.name)
        have = installed.get(key)
        declared = (pkg.version or "") + (f"+{pkg.local}" if pkg.local else "")
        if have is None:
            diffs.append(f"{pkg.name}: declared {declared or pkg.requirement}, not installed")
            continue
        if pkg.version is None:
            try:
                spec = Requirement(pkg.requirement).specifier
            except InvalidRequirement:
                continue  # a direct URL or similar: presence is all that can be checked
            if spec and not spec.contains(have, prereleases=True):
                diffs.append(f"{pkg.name}: declared {pkg.requirement}, installed {have}")
            continue
        have_public, have_local = _split_local(have)
        try:
            same_public = Version(have_public) == Version(pkg.version)
        except InvalidVersion:
            same_public = have_public == pkg.version
        if not same_public:
            diffs.append(f"{pkg.name}: declared {declared}, installed {have}")
        elif pkg.local and have_local != pkg.local:
            diffs.append(
                f"{pkg.name}: declared {declared}, installed {have} "
                f"(wrong variant: {pkg.local} declared, {have_local or 'no local tag'} installed)"
            )
    return diffs


VENV_SEEDS = frozenset({"pip", "setuptools", "wheel"})  # come with every venv: extras, never failures

NOT_RESOLVED_NOTE = (
    "the lock is not resolved: only its declared requirements ({n}) were compared, transitive "
    "dependencies were not checked (run `envbuild lock BUNDLE` to lock every distribution, then "
    "validate again)"
)


@dataclass(frozen=True)
class DistributionComparison:
    """The installed set against a resolved lock's distributions, one list per kind of difference.

    ``missing``, ``different`` and ``wrong_variant`` fail the stage; ``extras`` (installed, not in the
    lock) are listed but never fail.
    """

    missing: list[str] = field(default_factory=list)
    different: list[str] = field(default_factory=list)
    wrong_variant: list[str] = field(default_factory=list)
    extras: list[str] = field(default_factory=list)

    @property
    def failures(self) -> list[str]:
        """The failing differences as one flat list, each item naming its kind."""
        return (
            [f"missing: {m}" for m in self.missing]
            + [f"different version: {d}" for d in self.different]
            + [f"wrong variant: {w}" for w in self.wrong_variant]
        )


def _provenance(dist: LockedDistribution) -> str:
    parts = []
    if dist.declared_by:
        parts.append("declared by " + ", ".join(dist.declared_by))
    if dist.required_by:
        parts.append("required by " + ", ".join(dist.required_by))
    return f" ({'; '.join(parts)})" if parts else ""


def _same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def distribution_differences(
    lock: Lock, installed: dict[str, str], names: dict[str, str] | None = None
) -> DistributionComparison:
    """Compare every installed distribution (name -> version, any spelling) with ``lock.distributions``.

    A different public version fails even when it satisfies every declared range (the lock pins the
    whole set); a different local tag (``+cpu`` locked, ``+cu128`` or none installed) is a wrong
    variant.  ``names`` (canonical -> display name) only changes how extras are spelled.
    """
    have = {canonicalize_name(k): v for k, v in installed.items()}
    shown = {canonicalize_name(k): v for k, v in (names or {}).items()}
    out = DistributionComparison()
    locked = sorted(lock.distributions, key=lambda d: canonicalize_name(d.name))
    for dist in locked:
        key = canonicalize_name(dist.name)
        version = have.get(key)
        if version is None:
            out.missing.append(f"{dist.spec}{_provenance(dist)}")
            continue
        public, local = _split_local(version)
        wanted = dist.version + (f"+{dist.local}" if dist.local else "")
        if not _same_version(public, dist.version):
            out.different.append(f"{dist.name} {version} instead of {wanted}{_provenance(dist)}")
        elif local != dist.local:
            out.wrong_variant.append(f"{dist.name} {version} instead of {wanted}{_provenance(dist)}")
    names_locked = {canonicalize_name(d.name) for d in lock.distributions}
    for key in sorted(set(have) - names_locked):
        seed = " (comes with every venv)" if key in VENV_SEEDS else ""
        out.extras.append(f"{shown.get(key, key)} {have[key]}{seed}")
    return out


EXTRAS_IN_ERROR = 10  # the error line names this many extras; the facts and report.md list them all


def _group(label: str, items: list[str], limit: int | None) -> str:
    named = items[:limit] if limit is not None else items
    more = f" and {len(items) - len(named)} more" if len(named) < len(items) else ""
    return f"{label} ({len(items)}): " + ", ".join(named) + more


def _resolved_facts(lock: Lock, installed: dict[str, str], facts: dict[str, Any]) -> dict[str, Any]:
    cmp = distribution_differences(lock, installed, dict(facts.get("names", {})))
    return {
        "compared": "distributions",
        "locked_count": len(lock.distributions),
        "missing": cmp.missing,
        "different": cmp.different,
        "wrong_variant": cmp.wrong_variant,
        "extras": cmp.extras,
        "differences": cmp.failures,
    }


def decide_packages(lock: Lock, facts: dict[str, Any]) -> StageResult:
    """The installed set against the lock, plus every broken requirement (what ``pip check`` says).

    A resolved lock (``envbuild lock``) is compared whole: missing, different-version and
    wrong-variant distributions fail, extras are listed only.  An unresolved lock compares its
    declared requirements and says, as a note (the hint of a passed stage), that nothing else was.
    """
    installed: dict[str, str] = {
        canonicalize_name(k): str(v) for k, v in dict(facts.get("installed", {})).items()
    }
    broken: list[str] = list(facts.get("broken", []))
    shown: dict[str, Any] = {
        "lock_resolved": lock.resolved,
        "declared": len(lock.packages),
        "installed_count": len(installed),
        "declared_installed": {p.name: installed.get(canonicalize_name(p.name)) for p in lock.packages},
    }
    if lock.resolved:
        shown.update(_resolved_facts(lock, installed, facts))
        note = None
    else:
        note = NOT_RESOLVED_NOTE.format(n=len(lock.packages))
        shown.update(compared="declared", note=note, differences=package_differences(lock, installed))
    shown.update(
        broken=broken, check_mode=facts.get("check_mode"), envbuild_in_target="envbuild" in installed
    )
    if facts.get("shadowed"):
        shown["shadowed"] = facts["shadowed"]
    problems: list[str] = shown["differences"] + broken
    if not problems:
        return result("packages", None, note, **shown)
    head = f"{len(problems)} package problem{'s' if len(problems) != 1 else ''}: "
    if lock.resolved:
        groups = (
            ("missing", shown["missing"], None),
            ("different version", shown["different"], None),
            ("wrong variant", shown["wrong_variant"], None),
            ("broken requirements", broken, None),
            ("not in the lock, not failing", shown["extras"], EXTRAS_IN_ERROR),
        )
        head += "; ".join(_group(label, items, limit) for label, items, limit in groups if items)
        hint = (
            "reinstall from the bundle's requirements-rebuild.txt with `"
            f"{lock.python_executable} -m pip install --require-hashes --no-deps -r requirements-rebuild.txt"
            "`, or rebuild the image; never upgrade by hand"
        )
    else:
        head += "; ".join(problems)
        hint = (
            "reinstall from the bundle's requirements-rebuild.txt (or rebuild the image); "
            "do not upgrade by hand"
        )
    return result("packages", head, f"{hint}; {note}" if note else hint, **shown)
