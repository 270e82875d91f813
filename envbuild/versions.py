"""Small, pure helpers: driver versions, GPU arch coverage, wheel tags and markers against an image.

In the base room: the catalog's rows (markers read on a cache miss), the hardware rules and the plan use
them."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from packaging.markers import UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from envbuild.errors import UsageError
from envbuild.models import RequirementLine

if TYPE_CHECKING:
    from packaging.version import Version

DRIVER_RE = re.compile(r"^\d{3}\.\d{1,3}(\.\d{1,3})?$")


def parse_driver(text: str) -> tuple[int, ...]:
    """``"570.124.06"`` -> ``(570, 124, 6)``; ``"570"`` -> ``(570,)`` (catalog floors like R570)."""
    return tuple(int(part) for part in text.split("."))


def validate_driver(text: str) -> str:
    """Check a user-given NVIDIA driver version (``NNN.NN[.NN]``) or raise :class:`UsageError`."""
    if not DRIVER_RE.match(text):
        raise UsageError(
            f"--driver: {text!r} is not an NVIDIA Linux driver version; expected NNN.NN or NNN.NN.NN "
            "(for example 570.124.06, as printed by nvidia-smi)"
        )
    return text


def driver_at_least(driver: str, minimum: str) -> bool:
    return parse_driver(driver) >= parse_driver(minimum)


def max_driver(*drivers: str | None) -> str | None:
    present = [d for d in drivers if d]
    return max(present, key=parse_driver) if present else None


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def version_choices(values: Iterable[str]) -> str:
    """Dotted versions for a message, in version order (3.9 before 3.10), without duplicates."""
    return ", ".join(sorted(set(values), key=version_tuple))


# ---- CUDA / ROCm arch coverage -------------------------------------------------------------------


def cubin_covers(cubins: tuple[tuple[int, int], ...], cc: tuple[int, int]) -> tuple[int, int] | None:
    """The cubin that runs on ``cc`` under the same-major rule (``sm_X.y`` runs on ``X.z``, z >= y)."""
    usable = [c for c in cubins if c[0] == cc[0] and c[1] <= cc[1]]
    return max(usable) if usable else None


def ptx_covers(ptx: tuple[int, int] | None, cc: tuple[int, int]) -> bool:
    """PTX for ``compute_X.y`` can be JIT-compiled by the driver for any GPU with CC >= X.y."""
    return ptx is not None and ptx <= cc


def gfx_major(gfx: str) -> int:
    """``gfx942`` -> 9, ``gfx90a`` -> 9, ``gfx1100`` -> 11."""
    digits = gfx.removeprefix("gfx")
    return int(digits[:-2]) if len(digits) > 3 else int(digits[0])


# ---- wheels against an image ---------------------------------------------------------------------

_LEGACY_MANYLINUX = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}


def image_platforms(glibc: str, machine: str = "x86_64") -> list[str]:
    """Platform tags pip accepts on a glibc ``2.N`` Linux image, most specific first."""
    minor = int(glibc.split(".")[1])
    tags: list[str] = []
    for m in range(minor, 4, -1):
        tags.append(f"manylinux_2_{m}_{machine}")
        if m in _LEGACY_MANYLINUX:
            tags.append(f"{_LEGACY_MANYLINUX[m]}_{machine}")
    tags.append(f"linux_{machine}")
    return tags


def image_tags(python: str, glibc: str, machine: str = "x86_64") -> set[Tag]:
    """Every wheel tag pip accepts on the image's CPython ``python`` (a standard build) and glibc.

    The ABI is given (``cpXY``), not derived from the interpreter running envbuild, which may be a
    debug or free-threaded build unlike the image's."""
    major, minor = (int(p) for p in python.split("."))
    cp = f"cp{major}{minor}"
    platforms = image_platforms(glibc, machine)
    tags = set(cpython_tags((major, minor), abis=[cp], platforms=platforms))
    tags |= set(compatible_tags((major, minor), interpreter=cp, platforms=platforms))
    return tags


def wheel_filename(url: str) -> str:
    return unquote(urlparse(url).path.rsplit("/", 1)[-1])


def wheel_problem(url: str, python: str, glibc: str, machine: str = "x86_64") -> str | None:
    """Why the wheel at ``url`` cannot install on the image, or None when one of its tags fits."""
    name = wheel_filename(url)
    try:
        _, _, _, tags = parse_wheel_filename(name)
    except InvalidWheelFilename as exc:  # its message names the file and the part that is wrong
        return str(exc)
    if tags & image_tags(python, glibc, machine):
        return None
    shown = sorted(f"{t.interpreter}-{t.abi}-{t.platform}" for t in tags)
    tag_text = ", ".join(shown[:4]) + (f" and {len(shown) - 4} more" if len(shown) > 4 else "")
    cp = "cp" + python.replace(".", "")
    newest = f"manylinux_2_{glibc.split('.')[1]}_{machine}"
    return (
        f"{name} is tagged {tag_text}; the image has CPython {python} on {machine} Linux with glibc "
        f"{glibc}, so pip would refuse it. Use a wheel tagged {cp}-{cp} (or an abi3 wheel for {cp} or "
        f"older, or py3-none-any) for "
        f"{newest} or older (manylinux2014, linux_{machine}), or change python.version / base.os"
    )


def wheel_project(url: str) -> str | None:
    """The canonical project name in a wheel URL's file name, or None when it does not parse."""
    try:
        return canonicalize_name(parse_wheel_filename(wheel_filename(url))[0])
    except InvalidWheelFilename:
        return None


def wheel_version(url: str) -> Version | None:
    try:
        return parse_wheel_filename(wheel_filename(url))[1]
    except InvalidWheelFilename:
        return None


def marker_env(python: str, machine: str = "x86_64") -> dict[str, str]:
    """PEP 508 marker variables of the image's interpreter (CPython ``python`` on Linux)."""
    return {
        "implementation_name": "cpython",
        "implementation_version": f"{python}.0",
        "os_name": "posix",
        "platform_machine": machine,
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_system": "Linux",
        "platform_version": "",
        "python_full_version": f"{python}.0",
        "python_version": python,
        "sys_platform": "linux",
        "extra": "",
    }


def applies_on_image(req: Requirement, python: str) -> bool:
    """False when the requirement's environment marker excludes the image (pip would skip it)."""
    if req.marker is None:
        return True
    try:
        return req.marker.evaluate(marker_env(python))
    except (UndefinedComparison, UndefinedEnvironmentName):  # undecidable: assume it applies
        return True


def line_requirement(line: RequirementLine) -> Requirement | None:
    """The PEP 508 requirement of a line the loader already checked (the one parser of requirement text
    is :func:`envbuild.profile.pep508.parse_requirement`); None for options, includes, unparsable text."""
    if line.kind != "requirement":
        return None
    try:
        return Requirement(line.text)
    except InvalidRequirement:
        return None


def is_sdist_or_vcs(url: str) -> bool:
    """A direct URL that pip must build: a VCS checkout or a source archive."""
    scheme = url.split(":", 1)[0]
    if "+" in scheme and scheme.split("+", 1)[0] in {"git", "hg", "svn", "bzr"}:
        return True
    path = urlparse(url).path.lower()
    return path.endswith((".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".zip")) or (
        not path.endswith(".whl") and url.startswith("file:")
    )
