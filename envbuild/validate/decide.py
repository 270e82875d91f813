"""Pure decisions: facts (from probes, tools, recorded fixtures) + the lock -> a stage result.

Nothing here runs a process or imports torch, so recorded facts from real machines can be fed to the
same code that decides on a live machine.

Over 400 lines because: one concern, the stages decided from plain facts; the packages comparison
(declared, resolved, the torch family's builds) is most of it and shares its version helpers.
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
from envbuild.report.model import StageResult


def result(stage: str, error: str | None = None, hint: str | None = None, /, **facts: Any) -> StageResult:
    return StageResult(
        stage=stage, status="failed" if error else "passed", facts=facts, error=error, hint=hint
    )


def skipped(stage: str, reason: str, /, **facts: Any) -> StageResult:
    return StageResult(stage=stage, status="skipped", facts={"reason": reason, **facts})


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text))


# -- interpreter ------------------------------------------------------------------------------------

# How the interpreter under test was chosen; see envbuild.validate.interp.choose_python.
CHOSEN_BY_LOCK = "the lock's python_executable"


def _lock_prefix(lock: Lock) -> str | None:
    parent = os.path.dirname(lock.python_executable)
    return os.path.dirname(parent) if os.path.basename(parent) == "bin" else None


def interpreter_warnings(lock: Lock, facts: dict[str, Any], chosen_by: str) -> list[str]:
    """Facts worth a look that do not fail the stage: a prefix other than the lock's environment, a
    ``python`` first on PATH that is not the interpreter under test."""
    warnings: list[str] = []
    executable = str(facts.get("executable", ""))
    want = _lock_prefix(lock)
    got = str(facts.get("prefix", ""))
    if want and got and os.path.realpath(want) != os.path.realpath(got):
        if chosen_by == CHOSEN_BY_LOCK:
            warnings.append(
                f"the lock's interpreter {lock.python_executable} runs with prefix {got}, not {want}"
            )
        else:
            missing = (
                "" if os.path.exists(lock.python_executable) else f" ({lock.python_executable} is not here)"
            )
            warnings.append(
                f"validating {executable} (prefix {got}, chosen by {chosen_by}), not the lock's "
                f"environment {want}{missing}"
            )
    seen_on_path = [
        (f"`{name}`", str(seen["path"]))
        for name, seen in dict(facts.get("on_path") or {}).items()
        if seen.get("path") and not seen.get("is_under_test")
    ]
    if seen_on_path:  # at most 2 terminal lines: one folder when they share it (pyenv shims)
        folders = sorted({os.path.dirname(path) for _, path in seen_on_path})
        names = ", ".join(name for name, _ in seen_on_path)
        where = folders[0] if len(folders) == 1 else ", ".join(path for _, path in seen_on_path)
        warnings.append(f"{names} on PATH: {where}, not the interpreter under test")
    return warnings


def decide_interpreter(lock: Lock, facts: dict[str, Any], chosen_by: str = CHOSEN_BY_LOCK) -> StageResult:
    """Fail only on what the lock promises and the workload needs: the Python version (major.minor)
    and implementation (CPython, the ``cp`` of the locked wheels).  Where the interpreter lives (its
    prefix, its kind) and which ``python`` is first on PATH are facts, reported as warnings."""
    problems = []
    version = str(facts.get("version", ""))
    if version.split(".")[:2] != lock.python_version.split(".")[:2]:
        problems.append(f"Python {version} is running; the lock declares Python {lock.python_version}")
    want_impl = lock.resolution.implementation if lock.resolution else "cp"
    got_impl = facts.get("implementation_tag")
    if got_impl is not None and got_impl != want_impl:
        problems.append(
            f"the interpreter is {facts.get('implementation', got_impl)} ({got_impl}); the lock's wheels "
            f"are for {'CPython' if want_impl == 'cp' else want_impl} ({want_impl})"
        )
    warnings = interpreter_warnings(lock, facts, chosen_by)
    shown = {**facts, "chosen_by": chosen_by, "lock_prefix": _lock_prefix(lock), "warnings": warnings}
    if not problems:
        return result("interpreter", None, "; ".join(warnings) or None, **shown)
    v = ".".join(lock.python_version.split(".")[:2])
    hint = (
        f"validate and run the workload with a CPython {v}: inside the image {lock.python_executable}; "
        f"elsewhere rebuild a venv with `python{v} -m venv venv && venv/bin/pip install --no-deps "
        "--require-hashes -r requirements-rebuild.txt` and pass --python venv/bin/python"
    )
    return result("interpreter", "; ".join(problems), hint, **shown)


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


def installed_local(key: str, version: str, builds: dict[str, str] | None) -> tuple[str | None, str]:
    """The local tag of the installed ``version`` of ``key`` and how it was read.

    The metadata's own tag comes first.  Without one, the build's own version (the packages probe reads
    ``torch/version.py``'s ``__version__``: the package index's default torch build installs as
    ``2.11.0`` and calls itself ``2.11.0+cu130``) gives it, when its public version is the same.
    """
    public, local = _split_local(version)
    if local is not None:
        return local, ""
    build_public, build_local = _split_local((builds or {}).get(key, ""))
    if build_local and _same_version(public, build_public):
        return build_local, f" (its build {build_public}+{build_local}, from {key}/version.py)"
    return None, ""


def package_differences(
    lock: Lock, installed: dict[str, str], builds: dict[str, str] | None = None
) -> list[str]:
    """Every difference between the lock's packages and ``installed`` (canonical name -> version);
    ``builds``: the torch family's own versions (see :func:`installed_local`)."""
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
        have_public, _ = _split_local(have)
        have_local, read_from = installed_local(key, have, builds)
        if not _same_version(have_public, pkg.version):
            diffs.append(f"{pkg.name}: declared {declared}, installed {have}")
        elif pkg.local and have_local != pkg.local:
            diffs.append(
                f"{pkg.name}: declared {declared}, installed {have}{read_from} "
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
    lock: Lock,
    installed: dict[str, str],
    names: dict[str, str] | None = None,
    builds: dict[str, str] | None = None,
) -> DistributionComparison:
    """Compare every installed distribution (name -> version, any spelling) with ``lock.distributions``.

    A different public version fails even when it satisfies every declared range (the lock pins the
    whole set); a different local tag (``+cpu`` locked, ``+cu128`` or none installed) is a wrong
    variant.  ``names`` (canonical -> display name) only changes how extras are spelled; ``builds``:
    the torch family's own versions (see :func:`installed_local`).
    """
    have = {canonicalize_name(k): v for k, v in installed.items()}
    shown = {canonicalize_name(k): v for k, v in (names or {}).items()}
    out = DistributionComparison()
    locked = sorted((d for d in lock.distributions if d.in_image), key=lambda d: canonicalize_name(d.name))
    for dist in locked:
        key = canonicalize_name(dist.name)
        version = have.get(key)
        if version is None:
            out.missing.append(f"{dist.spec}{_provenance(dist)}")
            continue
        public, _ = _split_local(version)
        wanted = dist.version + (f"+{dist.local}" if dist.local else "")
        if not _same_version(public, dist.version):
            out.different.append(f"{dist.name} {version} instead of {wanted}{_provenance(dist)}")
            continue
        # A lock pinned without a local tag (the package index's default build) takes the metadata as it
        # is; one pinned with a tag also accepts the build that names that tag only in its version.py.
        local, read_from = (
            installed_local(key, version, builds) if dist.local else (_split_local(version)[1], "")
        )
        if local != dist.local:
            out.wrong_variant.append(
                f"{dist.name} {version}{read_from} instead of {wanted}{_provenance(dist)}"
            )
    names_locked = {canonicalize_name(d.name) for d in locked}
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
    cmp = distribution_differences(
        lock, installed, dict(facts.get("names", {})), dict(facts.get("builds", {}))
    )
    return {
        "compared": "distributions",
        "locked_count": sum(1 for d in lock.distributions if d.in_image),
        "missing": cmp.missing,
        "different": cmp.different,
        "wrong_variant": cmp.wrong_variant,
        "extras": cmp.extras,
        "differences": cmp.failures,
    }


def lock_names(lock: Lock) -> set[str]:
    """Canonical names of every distribution the lock names (declared packages and, once resolved,
    every locked distribution)."""
    return {canonicalize_name(p.name) for p in lock.packages} | {
        canonicalize_name(d.name) for d in lock.distributions
    }


def broken_owner(entry: str) -> str:
    """The distribution a broken-requirement line is about: the probe writes ``<name> <version> ...``
    (distribution names hold no spaces)."""
    return canonicalize_name(entry.split(" ", 1)[0])


def needed_by_lock(lock: Lock, requires: dict[str, list[str]]) -> set[str]:
    """The lock's names plus every installed distribution they require, directly or not."""
    needed = set(lock_names(lock))
    pending = list(needed)
    while pending:
        for dep in requires.get(pending.pop(), ()):
            key = canonicalize_name(dep)
            if key not in needed:
                needed.add(key)
                pending.append(key)
    return needed


def split_broken(
    lock: Lock, broken: list[str], requires: dict[str, list[str]] | None
) -> tuple[list[str], list[str]]:
    """Broken requirements that fail (about a distribution the lock names, or one that something the
    lock names requires) and those that are only a warning (about a distribution the environment
    carries for something else: a system Python's PyGObject without pycairo).

    ``requires`` is the installed requirement graph (canonical name -> required names).  Without it a
    resolved lock still decides (it names the whole environment); an unresolved lock cannot tell what
    its declared packages pull in, so every broken requirement fails.
    """
    if requires is None and not lock.resolved:
        return list(broken), []
    needed = needed_by_lock(lock, requires or {})
    locked = [b for b in broken if broken_owner(b) in needed]
    unlocked = [b for b in broken if broken_owner(b) not in needed]
    return locked, unlocked


def decide_packages(lock: Lock, facts: dict[str, Any], python: str | None = None) -> StageResult:
    """The installed set against the lock, plus every broken requirement (what ``pip check`` says).

    A resolved lock (``envbuild lock``) is compared whole: missing, different-version and
    wrong-variant distributions fail, extras are listed only.  An unresolved lock compares its
    declared requirements and says, as a note (the hint of a passed stage), that nothing else was.
    A broken requirement fails when the lock needs the distribution it is about (see
    :func:`split_broken`); otherwise it is a warning, listed in ``broken_unlocked``.  ``python`` (the
    interpreter under test) is named in the reinstall hint; the lock's interpreter by default.
    """
    installed: dict[str, str] = {
        canonicalize_name(k): str(v) for k, v in dict(facts.get("installed", {})).items()
    }
    requires = facts.get("requires")
    broken, unlocked = split_broken(lock, list(facts.get("broken", [])), requires)
    shown: dict[str, Any] = {
        "lock_resolved": lock.resolved,
        "declared": len(lock.packages),
        "installed_count": len(installed),
        "declared_installed": {p.name: installed.get(canonicalize_name(p.name)) for p in lock.packages},
        # every installed distribution (canonical name -> version): what `report diff` and `report
        # fleet` compare between runs, declared and transitive alike
        "installed": dict(sorted(installed.items())),
    }
    if lock.resolved:
        shown.update(_resolved_facts(lock, installed, facts))
        note = None
    else:
        note = NOT_RESOLVED_NOTE.format(n=len(lock.packages))
        shown.update(
            compared="declared",
            note=note,
            differences=package_differences(lock, installed, dict(facts.get("builds", {}))),
        )
    shown.update(
        broken=broken,
        broken_unlocked=unlocked,
        check_mode=facts.get("check_mode"),
        envbuild_in_target="envbuild" in installed,
    )
    if facts.get("shadowed"):
        shown["shadowed"] = facts["shadowed"]
    if facts.get("builds"):
        shown["builds"] = facts["builds"]  # the torch family's own versions (installed_local)
    warning = (
        f"{len(unlocked)} broken requirement{'s' if len(unlocked) != 1 else ''} of distributions the lock "
        f"neither names nor needs (not failing): " + "; ".join(unlocked)
        if unlocked
        else None
    )
    problems: list[str] = shown["differences"] + broken
    if not problems:
        return result("packages", None, "; ".join(t for t in (note, warning) if t) or None, **shown)
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
            f"{python or lock.python_executable} -m pip install --require-hashes --no-deps "
            "-r requirements-rebuild.txt`, or rebuild the image; never upgrade by hand"
        )
    else:
        head += "; ".join(problems)
        hint = (
            "reinstall from the bundle's requirements-rebuild.txt (or rebuild the image); "
            "do not upgrade by hand"
        )
    return result("packages", head, "; ".join(t for t in (hint, note, warning) if t), **shown)
