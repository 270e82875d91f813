"""Rows of ``blender.toml``: the official download, its runtime packages, each Blender series, and the
sha256 of each release's Linux tarball where a source publishes it (``[[tarball]]``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from envbuild.boundary import INPUT
from envbuild.catalog.rows import DRIVER, GFX, SERIES, SM, Row, Tier, fail, not_empty, shape, shapes

_APT = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
_CC = re.compile(r"^\d+\.\d$")
_PTX = re.compile(r"^compute_\d+$")
_BPY_PYTHON = re.compile(r"^3\.\d{1,2}$")
_HTTPS = re.compile(r"^https://[^\s]+$")
_RELEASE = re.compile(r"^\d+\.\d+\.\d+$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True, kw_only=True)
class BlenderSeries(Row):
    series: str
    cuda_cubins: tuple[str, ...]
    cuda_ptx: str | None = None
    cuda_min_cc: str
    optix_min_cc: str
    optix_min_driver: str
    hip_min_major: int
    hip_kernels: tuple[str, ...]
    # Patch releases known to be published (X.Y.Z, oldest first); not exhaustive, so a version missing
    # from the list is not refused.  releases_source says where the list was read (required with it).
    releases: tuple[str, ...] = ()
    releases_source: str | None = None
    # The CPython X.Y of the series' bpy wheels on PyPI (Requires-Python ==X.Y.*, cpXY tags); None: no
    # manylinux bpy wheel is published for the series, so blender.source = "pypi" cannot install it.
    bpy_python: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        shape("series", self.series, SERIES, "Blender series (X.Y)")
        shapes("cuda_cubins", self.cuda_cubins, SM, "sm_XY cubin")
        shape("cuda_ptx", self.cuda_ptx, _PTX, "PTX target (compute_NN)")
        shape("cuda_min_cc", self.cuda_min_cc, _CC, "compute capability (X.Y)")
        shape("optix_min_cc", self.optix_min_cc, _CC, "compute capability (X.Y)")
        shape("optix_min_driver", self.optix_min_driver, DRIVER, "driver version")
        shapes("hip_kernels", self.hip_kernels, GFX, "gfx target")
        shape("bpy_python", self.bpy_python, _BPY_PYTHON, "Python version (3.X)")
        for item in self.releases:
            if not _RELEASE.match(item) or not item.startswith(self.series + "."):
                fail("releases", f"{item!r} is not an X.Y.Z release of series {self.series}")
        keys = [tuple(int(x) for x in item.split(".")) for item in self.releases]
        if keys != sorted(set(keys)):
            fail("releases", "must be increasing, each once")
        if self.releases and not self.releases_source:
            fail("releases_source", "is required with releases")
        if self.bpy_python and not self.releases_source:
            fail("releases_source", "is required with bpy_python (it says where both were read)")

    @property
    def newest_release(self) -> str | None:
        return self.releases[-1] if self.releases else None


@dataclass(frozen=True, kw_only=True)
class BlenderTarball(Row):
    """The sha256 of one release's ``blender-X.Y.Z-linux-x64.tar.xz``, pinned: ``envbuild fetch``
    refuses a tarball with other bytes whatever its checksum list beside it says.  ``source`` says where
    the value was published (download.blender.org itself cannot be read from where the catalog is
    written)."""

    version: str
    sha256: str

    def __post_init__(self) -> None:
        super().__post_init__()
        shape("version", self.version, _RELEASE, "Blender release (X.Y.Z)")
        shape("sha256", self.sha256, _SHA256, "sha256 (64 lowercase hex digits)")


@dataclass(frozen=True, kw_only=True)
class BlenderCatalog:
    __pydantic_config__ = INPUT  # read from outside: see envbuild.boundary

    url: str
    sha256_url: str
    url_tier: Tier
    url_source: str
    runtime_apt: tuple[str, ...]
    runtime_apt_source: str
    series: tuple[BlenderSeries, ...]
    tarball: tuple[BlenderTarball, ...] = ()  # pinned sha256s; a release without a row is not pinned

    def __post_init__(self) -> None:
        shape("url", self.url, _HTTPS, "https URL")
        shape("sha256_url", self.sha256_url, _HTTPS, "https URL")
        shapes("runtime_apt", self.runtime_apt, _APT, "apt package name")
        not_empty("series", self.series)
        known = {s.series for s in self.series}
        seen: set[str] = set()
        for row in self.tarball:
            if row.version in seen:
                fail("tarball", f"{row.version} is pinned twice")
            seen.add(row.version)
            if row.version.rsplit(".", 1)[0] not in known:
                fail("tarball", f"{row.version}: its series has no [[series]] row")

    def pinned(self, version: str) -> BlenderTarball | None:
        """The pinned sha256 row of release ``version`` (X.Y.Z), or None."""
        return next((row for row in self.tarball if row.version == version), None)
