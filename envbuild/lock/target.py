"""The platform a lock resolves for: the image's Python, implementation, glibc and architecture.

The resolver is told the image's target, never the host's: ``uv`` takes it as ``--python-version`` and
``--python-platform x86_64-manylinux_2_NN``; the wheel filter and ``pip download`` take it as the list
of platform tags the image's pip accepts.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from packaging.tags import Tag, compatible_tags, cpython_tags

from envbuild.errors import BundleError
from envbuild.models import Lock, OsId

# glibc of each supported OS (x86_64): the newest manylinux_2_NN tag its pip accepts.
GLIBC: dict[OsId, tuple[int, int]] = {"debian12": (2, 36), "ubuntu22.04": (2, 35), "ubuntu24.04": (2, 39)}
ARCH = "x86_64"
_LEGACY = ("manylinux2014", "manylinux2010", "manylinux1")


@dataclass(frozen=True)
class Target:
    python_version: str  # "3.11"
    os: OsId
    implementation: str = "cp"
    arch: str = ARCH

    @classmethod
    def of(cls, lock: Lock) -> Target:
        return cls(python_version=lock.python_version, os=lock.os)

    @property
    def glibc(self) -> tuple[int, int]:
        try:
            return GLIBC[self.os]
        except KeyError:
            raise BundleError(
                f"lock os {self.os!r} has no known glibc; valid: {', '.join(sorted(GLIBC))}"
            ) from None

    @property
    def resolver_platform(self) -> str:
        """uv's ``--python-platform`` value."""
        major, minor = self.glibc
        return f"{self.arch}-manylinux_{major}_{minor}"

    @property
    def platform_tags(self) -> tuple[str, ...]:
        """Every platform tag an image of this OS can install, newest first (pip's own order)."""
        major, minor = self.glibc
        tags = [f"manylinux_{major}_{n}_{self.arch}" for n in range(minor, 4, -1)]
        legacy = {"manylinux2014": 17, "manylinux2010": 12, "manylinux1": 5}
        ordered: list[str] = []
        for tag in tags:
            ordered.append(tag)
            n = int(tag.split("_")[2])
            ordered += [f"{name}_{self.arch}" for name in _LEGACY if legacy[name] == n]
        return tuple(ordered)

    @property
    def interpreter(self) -> tuple[int, int]:
        major, minor = self.python_version.split(".")[:2]
        return int(major), int(minor)

    @cached_property
    def tags(self) -> frozenset[Tag]:
        """Every wheel tag (interpreter-abi-platform) the image's pip accepts."""
        platforms = list(self.platform_tags)
        found = set(cpython_tags(self.interpreter, platforms=platforms))
        found |= set(
            compatible_tags(self.interpreter, f"cp{self.interpreter[0]}{self.interpreter[1]}", platforms)
        )
        return frozenset(found)

    def describe(self) -> str:
        return (
            f"CPython {self.python_version}, {self.platform_tags[0]} (glibc {'.'.join(map(str, self.glibc))})"
        )
