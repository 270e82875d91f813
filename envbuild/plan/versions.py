"""Small, pure helpers: driver versions, GPU arch coverage, wheel tags against an image."""

from __future__ import annotations

import re
from urllib.parse import unquote, urlparse

from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from envbuild.errors import UsageError

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
    major, minor = (int(p) for p in python.split("."))
    platforms = image_platforms(glibc, machine)
    tags = set(cpython_tags((major, minor), platforms=platforms))
    tags |= set(compatible_tags((major, minor), interpreter=f"cp{major}{minor}", platforms=platforms))
    return tags


def wheel_filename(url: str) -> str:
    return unquote(urlparse(url).path.rsplit("/", 1)[-1])


def wheel_problem(url: str, python: str, glibc: str, machine: str = "x86_64") -> str | None:
    """Why the wheel at ``url`` cannot install on the image, or None when one of its tags fits."""
    name = wheel_filename(url)
    try:
        _, _, _, tags = parse_wheel_filename(name)
    except InvalidWheelFilename as exc:
        return f"{name!r} is not a valid wheel file name ({exc})"
    if tags & image_tags(python, glibc, machine):
        return None
    interpreters = sorted({t.interpreter for t in tags})
    platforms = sorted({t.platform for t in tags})
    return (
        f"{name} is built for {'/'.join(interpreters)} on {'/'.join(platforms)}; the image has CPython "
        f"{python} "
        f"on {machine} with glibc {glibc} (manylinux_2_{glibc.split('.')[1]}_{machine} and older)"
    )


def is_sdist_or_vcs(url: str) -> bool:
    """A direct URL that pip must build: a VCS checkout or a source archive."""
    scheme = url.split(":", 1)[0]
    if "+" in scheme and scheme.split("+", 1)[0] in {"git", "hg", "svn", "bzr"}:
        return True
    path = urlparse(url).path.lower()
    return path.endswith((".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".zip")) or (
        not path.endswith(".whl") and url.startswith("file:")
    )
