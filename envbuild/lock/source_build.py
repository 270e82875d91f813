"""``[python] build_from_source``: lock the listed sdists, and lock what building them needs.

The resolver runs with ``--only-binary :all:`` plus ``--no-binary NAME`` for each listed name (uv 0.13:
a named ``--no-binary`` wins over ``:all:``, so only those are taken as sdists; every other distribution
stays wheel-only).  uv reads an sdist's dependencies from its static metadata (PKG-INFO 2.2+ with a
``pyproject.toml``) without building it; where the metadata is dynamic uv would build it in isolation,
which a build that imports torch cannot survive, and the resolver's error says so.

The build dependencies of each sdist are read from its bytes (:func:`build_requirements`): the
``[build-system] requires`` of its ``pyproject.toml`` (PEP 518), else setuptools (PEP 517's default for a
``setup.py`` project), plus the third-party modules its ``setup.py`` imports at top level, plus ninja
when it builds with ``torch.utils.cpp_extension`` (which compiles with ninja when it can).  They are
resolved in a second run of the resolver, constrained to the versions of the first, so a package both
need is the same file; those not installed in the image already are locked with ``role = "build"``:
the builder stage installs them beside the build (``pip install --target``), never in the image.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from envbuild.lock.sources import read_members
from envbuild.lock.target import Target
from envbuild.lock.uv import Sources
from envbuild.models import Finding, Lock, LockedDistribution
from envbuild.net import open_url

MAX_SDIST_BYTES = 512 << 20  # flash-attn's sdist is about 8 MB; a build dependency list is tiny
DEFAULT_BACKEND = "setuptools>=40.8.0"  # PEP 517: a project without [build-system] builds with setuptools
# setup.py imports whose distribution has another name (import name -> distribution)
MODULE_DISTRIBUTIONS = {
    "pkg_resources": "setuptools",
    "Cython": "cython",
    "yaml": "pyyaml",
    "git": "gitpython",
    "cpuinfo": "py-cpuinfo",
    "skbuild": "scikit-build",
    "pybind11": "pybind11",
}


def _imports(setup_py: str) -> list[str]:
    """Top-level modules ``setup.py`` imports (``import a.b`` and ``from a.b import c``: ``a``)."""
    try:
        tree = ast.parse(setup_py)
    except SyntaxError:
        return []
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
    return found


def build_requirements(members: dict[str, str], project: str) -> list[str]:
    """What building the sdist whose ``setup.py``/``pyproject.toml`` are ``members`` needs."""
    from envbuild.compat import tomllib

    wanted: list[str] = []
    if "pyproject.toml" in members:
        try:
            system = tomllib.loads(members["pyproject.toml"]).get("build-system", {})
        except tomllib.TOMLDecodeError:
            system = {}
        requires = system.get("requires")
        if isinstance(requires, list):
            wanted += [str(r) for r in requires]
    if not wanted:
        wanted.append(DEFAULT_BACKEND)
    modules = _imports(members.get("setup.py", ""))
    if any(m == "torch.utils.cpp_extension" or m.startswith("torch.utils.cpp_extension.") for m in modules):
        wanted.append("ninja")
    own = str(canonicalize_name(project))
    for module in modules:
        top = module.split(".", 1)[0]
        if top in sys.stdlib_module_names or top in ("setuptools", "distutils", "torch", "__future__"):
            continue
        name = MODULE_DISTRIBUTIONS.get(top, top)
        if str(canonicalize_name(name)) != own:
            wanted.append(name)
    seen: dict[str, str] = {}
    for text in wanted:
        try:
            key = str(canonicalize_name(Requirement(text).name))
        except InvalidRequirement:
            continue
        if key != "torch":  # torch is the image's own, installed before the build
            seen.setdefault(key, text)
    return list(seen.values())


def sdist_members(url: str, filename: str) -> dict[str, str]:
    """``setup.py``/``pyproject.toml`` of the sdist at ``url`` (http(s) or file); {} when unreadable."""
    import tarfile
    import zipfile

    try:
        with open_url(url, timeout=120) as response:
            data = response.read(MAX_SDIST_BYTES + 1)
        if len(data) > MAX_SDIST_BYTES:
            return {}
        return read_members(data, filename)
    except (OSError, ValueError, tarfile.TarError, zipfile.BadZipFile):
        return {}


def sdist_entry(package: dict[str, Any]) -> dict[str, Any] | None:
    """The pylock ``sdist`` table of a package (uv 0.13 writes ``sdist = {url, hashes, ...}``)."""
    entry = package.get("sdist")
    return entry if isinstance(entry, dict) else None


def input_lines(requirements: dict[str, list[str]]) -> str:
    lines = ["# envbuild lock: the build dependencies of [python] build_from_source"]
    for project, wanted in sorted(requirements.items()):
        lines.append(f"# {project}")
        lines += wanted
    return "\n".join(lines) + "\n"


def constraint_lines(dists: Iterable[LockedDistribution]) -> str:
    return "".join(f"{d.spec}\n" for d in dists)


def mark_build(
    build: list[LockedDistribution], installed: Iterable[LockedDistribution]
) -> list[LockedDistribution]:
    """The build resolution's distributions the image does not install already, as ``role = "build"``."""
    have = {d.name for d in installed}
    return [replace(d, role="build", declared_by=()) for d in build if d.name not in have]


def unknown_names(names: Iterable[str], resolved: Iterable[str], where: str) -> list[Finding]:
    """A build_from_source name the resolution does not contain: an error, naming what it holds."""
    have = set(resolved)
    return [
        Finding(
            severity="error",
            code="E-SOURCE-NOT-RESOLVED",
            message=(
                f"{where}: python.build_from_source names {name!r}, which is not in the resolved environment "
                "(not required by the profile's requirements or their dependencies); add it to "
                "python.packages or remove it from build_from_source"
            ),
        )
        for name in names
        if name not in have
    ]


def work_file(work: Path, name: str, text: str) -> Path:
    path = work / name
    path.write_text(text, encoding="utf-8")
    return path


def resolve_beside(
    command: list[str], folder: Path, request: str, dists: Iterable[LockedDistribution], target: Target
) -> tuple[list[LockedDistribution], list[str]]:
    """A second run of the resolver for what the builder stage needs beside the environment (``request``:
    requirement lines), constrained to the versions the image installs (``dists`` of ``role = "install"``),
    so a distribution both need is the same file.  Returns (its distributions, the names that have no wheel
    for ``target``); raises :class:`envbuild.lock.uv.ResolverFailed` when it does not resolve."""
    from envbuild.lock.pylock_read import distributions_from
    from envbuild.lock.uv import parse_annotated, run_uv

    folder.mkdir(exist_ok=True)
    pins = work_file(folder, "pins.txt", constraint_lines(d for d in dists if d.role == "install"))
    wanted = work_file(folder, "build.in", request)
    raw = run_uv([*command, "--constraint", str(pins)], wanted, folder)
    return distributions_from(raw.pylock, parse_annotated(raw.annotated), {}, target)


def source_builds(
    lock: Lock,
    pylock: dict[str, Any],
    dists: list[LockedDistribution],
    command: list[str],
    work: Path,
    target: Target,
    sources: Sources,
) -> tuple[list[LockedDistribution], list[Finding]]:
    """The build dependencies of the lock's source builds (``role = "build"``) and what to say about
    them: a listed name the resolution lacks (error), one that has a wheel for the target (warning), a
    build dependency that has no wheel (error)."""
    from envbuild.lock.pylock_read import installable, sdist_url
    from envbuild.lock.sources import wheel_files

    where = f"profile {lock.profile_name!r}"
    findings = unknown_names(lock.build_from_source, [d.name for d in dists], where)
    wanted: dict[str, list[str]] = {}
    packages = {str(canonicalize_name(str(p["name"]))): p for p in pylock.get("packages", [])}
    for dist in dists:
        if dist.role != "source":
            continue
        wheels = [w for w in wheel_files(dist.name, dist.version, sources) if installable(w, target)]
        if wheels:
            findings.append(
                Finding(
                    severity="warning",
                    code="W-SOURCE-HAS-WHEEL",
                    message=(
                        f"{where}: python.build_from_source lists {dist.name}, but {dist.spec} has a "
                        f"wheel for {target.describe()} ({wheels[0]}): the source build is unnecessary "
                        "and slow; remove it from build_from_source to install the wheel"
                    ),
                )
            )
        url = sdist_url(packages.get(dist.name, {}))
        members = sdist_members(url, dist.files[0].filename) if url else {}
        wanted[dist.name] = build_requirements(members, dist.name)
    if not wanted:
        return [], findings
    built, no_wheel = resolve_beside(command, work / "build-dependencies", input_lines(wanted), dists, target)
    for name in no_wheel:
        findings.append(
            Finding(
                severity="error",
                code="E-SOURCE-ONLY",
                message=(
                    f"{where}: {name}, a build dependency of {', '.join(sorted(wanted))} (python."
                    f"build_from_source), has no wheel for {target.describe()}; pin a release that publishes "
                    "one in python.packages"
                ),
            )
        )
    return mark_build(built, dists), findings
