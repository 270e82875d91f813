"""The OS packages of the image: the plan's list plus what the image itself needs.

The builder stage installs :func:`apt_packages`; the final stage :func:`runtime_packages` (the same
without packages that only ship ``*.whl`` files).  The lock records the final stage's list.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from envbuild.errors import BundleError
from envbuild.models import Plan

_APT = re.compile(r"^[a-z0-9][a-z0-9+.-]+(=[A-Za-z0-9.+:~_-]+)?$")
_WHEEL_ONLY = re.compile(r"^python3(\.\d+)?-venv$|^python3-(pip|setuptools|wheel)-whl$")


def _apt_name(entry: str) -> str:
    return entry.split("=", 1)[0]


def python_packages(plan: Plan) -> list[str]:
    """The OS packages that provide ``python3.X`` (and its venv module, headers when compiling)."""
    if plan.python_provision == "base-image":
        return []
    exe = f"python{plan.python_version}"
    packages = [exe, f"{exe}-venv"]
    if plan.compiles or plan.python_provision == "deadsnakes":
        packages.append(f"{exe}-dev")
    return packages


def apt_packages(plan: Plan) -> list[str]:
    """The plan's apt list plus what the image itself needs, deduplicated by name (plan pins win).

    A package without a pin gets the version a first build recorded (``render --apt-from``), if any."""
    chosen: dict[str, str] = {}
    for entry in plan.apt:
        if not _APT.match(entry):
            raise BundleError(f"{plan.profile.path}: system.apt: invalid Debian package {entry!r}")
        name = _apt_name(entry)
        if "=" not in chosen.get(name, "="):
            chosen[name] = entry  # the profile's "g++=VERSION" over the plan's own unpinned "g++"
        chosen.setdefault(name, entry)
    for entry in ["ca-certificates", *python_packages(plan)]:
        chosen.setdefault(entry, entry)
    recorded = dict(plan.apt_recorded)
    for name, entry in chosen.items():
        if "=" not in entry and name in recorded:
            chosen[name] = f"{name}={recorded[name]}"
    return [chosen[name] for name in sorted(chosen)]


def apt_versions_from_record(
    found: Mapping[str, str], path: str, plan: Plan
) -> tuple[tuple[tuple[str, str], ...], list[str]]:
    """``((package, version), ...)`` for the image's packages from the Debian packages (name -> version)
    a build record at ``path`` holds (the caller reads it: :func:`envbuild.image.record.read_record`), and
    the names of the final image's packages the record lacks (they stay unpinned).  The builder stage's
    own packages (``python3.X-venv``) are not in the final image, so no record has them: they stay
    unpinned quietly.  A version that is not a Debian version is refused."""
    wanted = [_apt_name(p) for p in apt_packages(plan) if "=" not in p]
    pins: list[tuple[str, str]] = []
    for name in wanted:
        version = found.get(name)
        if version is None:
            continue
        if not _APT.match(f"{name}={version}"):
            raise BundleError(f"{path}: package {name!r} has a version apt cannot take: {version!r}")
        pins.append((name, version))
    final = {_apt_name(p) for p in runtime_packages(apt_packages(plan))}
    return tuple(pins), [n for n in wanted if n not in found and n in final]


def runtime_packages(packages: list[str]) -> list[str]:
    """``packages`` without those that only ship ``*.whl`` files (ensurepip's, for ``python -m venv``).

    The venv is created in the builder stage; the final stage needs the interpreter, not the wheels.
    """
    return [p for p in packages if not _WHEEL_ONLY.match(_apt_name(p))]
