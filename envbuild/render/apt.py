"""The OS packages of the image: the plan's list plus what the image itself needs.

The builder stage installs :func:`apt_packages`; the final stage :func:`runtime_packages` (the same
without packages that only ship ``*.whl`` files).  The lock records the final stage's list.
"""

from __future__ import annotations

import re

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
    """The plan's apt list plus what the image itself needs, deduplicated by name (plan pins win)."""
    chosen: dict[str, str] = {}
    for entry in plan.apt:
        if not _APT.match(entry):
            raise BundleError(f"{plan.profile.path}: system.apt: invalid Debian package {entry!r}")
        chosen.setdefault(_apt_name(entry), entry)
    for entry in ["ca-certificates", *python_packages(plan)]:
        chosen.setdefault(entry, entry)
    return [chosen[name] for name in sorted(chosen)]


def runtime_packages(packages: list[str]) -> list[str]:
    """``packages`` without those that only ship ``*.whl`` files (ensurepip's, for ``python -m venv``).

    The venv is created in the builder stage; the final stage needs the interpreter, not the wheels.
    """
    return [p for p in packages if not _WHEEL_ONLY.match(_apt_name(p))]
