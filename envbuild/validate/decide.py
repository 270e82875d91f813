"""Pure decisions: facts (from probes, tools, recorded fixtures) + the lock -> a stage result.

Nothing here runs a process or imports torch, so recorded facts from real machines can be fed to the
same code that decides on a live machine.
"""

from __future__ import annotations

import os
import re
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envbuild.models import Lock
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


def decide_packages(lock: Lock, facts: dict[str, Any]) -> StageResult:
    installed: dict[str, str] = dict(facts.get("installed", {}))
    diffs = package_differences(lock, installed)
    broken: list[str] = list(facts.get("broken", []))
    shown = {
        "declared": len(lock.packages),
        "installed_count": len(installed),
        "declared_installed": {p.name: installed.get(canonicalize_name(p.name)) for p in lock.packages},
        "differences": diffs,
        "broken": broken,
        "check_mode": facts.get("check_mode"),
        "envbuild_in_target": "envbuild" in installed,
    }
    if facts.get("shadowed"):
        shown["shadowed"] = facts["shadowed"]
    problems = diffs + broken
    if not problems:
        return result("packages", **shown)
    head = f"{len(problems)} package problem{'s' if len(problems) != 1 else ''}: " + "; ".join(problems)
    return result(
        "packages",
        head,
        "reinstall from the bundle's requirements-rebuild.txt (or rebuild the image); do not upgrade by hand",
        **shown,
    )
