"""Typed, frozen rows of the catalog (the TOML files in ``envbuild/data/``).

Every row carries ``tier`` (P primary, S secondary, unconfirmed) and ``source`` (the citation copied
from the design's compat-facts).  Field validators reject malformed values at load time, so the
planner can rely on shapes (``sm_90``, ``gfx942``, ``570.124.06``, ``cu128``, ``rocm6.2.4``).
"""

from __future__ import annotations

import math
import re
from typing import Literal

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from envbuild.models import Card, Devices, OsId, Vendor

Tier = Literal["P", "S", "unconfirmed"]

_SERIES = re.compile(r"^\d+\.\d+$")
_VERSION = re.compile(r"^\d+\.\d+(\.\d+)?$")
_DRIVER = re.compile(r"^\d{3}(\.\d{1,3}){0,2}$")
_CUDA_VARIANT = re.compile(r"^cu\d{3}$")
_ROCM_VARIANT = re.compile(r"^rocm\d+\.\d+(\.\d+)?$")
_SM = re.compile(r"^sm_(\d+)(\d)$")
_GFX = re.compile(r"^gfx[0-9a-f]{3,4}$")
_ARCH_ITEM = re.compile(r"^\d+\.\d(\+PTX)?$")
_APT = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")


class Row(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    tier: Tier
    source: str = Field(min_length=3)


def _check(pattern: re.Pattern[str], value: str, what: str) -> str:
    if not pattern.match(value):
        raise ValueError(f"{value!r} is not a valid {what}")
    return value


def sm_cc(arch: str) -> tuple[int, int]:
    """``sm_89`` -> (8, 9); ``sm_120`` -> (12, 0)."""
    m = _SM.match(arch)
    if not m:
        raise ValueError(f"{arch!r} is not an sm_XY arch")
    return int(m.group(1)), int(m.group(2))


class CardEntry(Row, Devices):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    name: str
    vendor: Vendor
    arch: str
    memory_gib: float = Field(ge=0)
    cards_per_lot: int = Field(ge=1, le=16)
    bf16_tflops: float | None = None
    bandwidth_gbs: float | None = None
    min_cuda: str | None = None
    min_rocm: str | None = None
    min_rocm_tier: Tier = "P"
    min_driver: str | None = None
    host_arch: Literal["x86_64", "aarch64"] = "x86_64"
    devices_per_card: int = Field(default=1, ge=1, le=8)  # MI250X: 2 GCDs, each its own device
    device_memory_gib: float | None = Field(default=None, gt=0)  # required when devices_per_card > 1

    @model_validator(mode="after")
    def _devices(self) -> CardEntry:
        if self.devices_per_card > 1 and self.device_memory_gib is None:
            raise ValueError("device_memory_gib is required when devices_per_card > 1")
        if self.device_memory_gib is not None and not math.isclose(
            self.device_memory_gib * self.devices_per_card, self.memory_gib
        ):
            raise ValueError(
                f"devices_per_card x device_memory_gib = {self.devices_per_card} x "
                f"{self.device_memory_gib:g} GiB is not memory_gib ({self.memory_gib:g} GiB)"
            )
        return self

    @field_validator("arch")
    @classmethod
    def _arch(cls, v: str) -> str:
        if v == "" or _SM.match(v) or _GFX.match(v):
            return v
        raise ValueError(f"{v!r} is not an arch (sm_XY, gfxNNN, or empty for cpu)")

    @field_validator("min_cuda", "min_rocm")
    @classmethod
    def _ver(cls, v: str | None) -> str | None:
        return None if v is None else _check(_VERSION, v, "version")

    @field_validator("min_driver")
    @classmethod
    def _drv(cls, v: str | None) -> str | None:
        return None if v is None else _check(_DRIVER, v, "driver version")

    @property
    def cc(self) -> tuple[int, int] | None:
        return sm_cc(self.arch) if self.vendor == "nvidia" else None

    @property
    def card(self) -> Card:
        return Card(
            id=self.id,
            name=self.name,
            vendor=self.vendor,
            arch=self.arch,
            memory_gib=self.memory_gib,
            cards_per_lot=self.cards_per_lot,
            bf16_tflops=self.bf16_tflops,
            bandwidth_gbs=self.bandwidth_gbs,
            min_cuda=self.min_cuda,
            min_rocm=self.min_rocm,
            min_driver=self.min_driver,
            devices_per_card=self.devices_per_card,
            device_memory_gib=self.memory_per_device,
            source=f"{self.source} [{self.tier}]",
        )


class ReserveEntry(Row):
    """GiB of each device a job cannot use: the runtime context each process creates there."""

    vendor: Literal["nvidia", "amd"]
    gib: float = Field(ge=0, lt=16)
    what: str = Field(min_length=3)  # "the CUDA context", for messages
    cite: str = Field(min_length=3)  # a short citation, for messages


_DATE = re.compile(r"^\d{4}-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?$")


def check_date(value: str) -> str:
    """``2026-12`` or ``2026-12-15`` (a price's date: when it was read)."""
    return _check(_DATE, value, "date (YYYY-MM-DD or YYYY-MM)")


class Terms(Row):
    """The provider's rental terms: durations and how many lots one order may hold."""

    provider: str = Field(min_length=2)
    days: tuple[int, ...] = Field(min_length=1)
    min_lots: int = Field(ge=1)
    max_lots: int = Field(ge=1)
    cite: str = Field(min_length=3)

    @model_validator(mode="after")
    def _lots(self) -> Terms:
        if self.max_lots < self.min_lots:
            raise ValueError(f"max_lots {self.max_lots} is below min_lots {self.min_lots}")
        if any(d < 1 for d in self.days) or list(self.days) != sorted(set(self.days)):
            raise ValueError(f"days must be increasing positive numbers, got {list(self.days)}")
        return self


class PriceEntry(Row):
    """One card's lot prices: days -> USD for one lot (all the lot's cards) for that duration."""

    card: str
    usd: dict[int, float] = Field(min_length=1)
    date: str
    cite: str = Field(min_length=3)

    @field_validator("usd")
    @classmethod
    def _usd(cls, v: dict[int, float]) -> dict[int, float]:
        bad = [f"{days}: {usd!r}" for days, usd in v.items() if not usd > 0]
        if bad:
            raise ValueError(f"USD per lot must be positive ({', '.join(bad)})")
        return v

    @field_validator("date")
    @classmethod
    def _date(cls, v: str) -> str:
        return check_date(v)


class PatchEntry(Row):
    version: str
    torchvision: str
    torchaudio: str | None = None
    triton: str

    @field_validator("version", "torchvision", "torchaudio", "triton")
    @classmethod
    def _ver(cls, v: str | None) -> str | None:
        return None if v is None else _check(_VERSION, v, "version")


class CudaWheel(Row):
    variant: str
    arch_list: str  # TORCH_CUDA_ARCH_LIST as written upstream: "7.5;8.0;...;12.0+PTX"
    only_patches: tuple[str, ...] = ()

    @field_validator("variant")
    @classmethod
    def _variant(cls, v: str) -> str:
        return _check(_CUDA_VARIANT, v, "CUDA wheel variant (cuNNN)")

    @field_validator("arch_list")
    @classmethod
    def _archs(cls, v: str) -> str:
        items = v.split(";")
        for item in items:
            _check(_ARCH_ITEM, item, "TORCH_CUDA_ARCH_LIST entry (X.Y or X.Y+PTX)")
        if any("+PTX" in item for item in items[:-1]):
            raise ValueError("+PTX may only follow the last arch")
        return v

    @property
    def archs(self) -> tuple[str, ...]:
        """``("sm_75", ..., "sm_120+PTX")``."""
        return tuple("sm_" + item.replace(".", "") for item in self.arch_list.split(";"))

    @property
    def cubins(self) -> tuple[tuple[int, int], ...]:
        out = []
        for item in self.arch_list.split(";"):
            major, minor = item.removesuffix("+PTX").split(".")
            out.append((int(major), int(minor)))
        return tuple(out)

    @property
    def ptx(self) -> tuple[int, int] | None:
        last = self.arch_list.split(";")[-1]
        if not last.endswith("+PTX"):
            return None
        major, minor = last.removesuffix("+PTX").split(".")
        return int(major), int(minor)


class RocmWheel(Row):
    variant: str
    gfx: str

    @field_validator("variant")
    @classmethod
    def _variant(cls, v: str) -> str:
        return _check(_ROCM_VARIANT, v, "ROCm wheel variant (rocmX.Y[.Z])")

    @field_validator("gfx")
    @classmethod
    def _gfx(cls, v: str) -> str:
        for item in v.split(";"):
            _check(_GFX, item, "gfx target")
        return v

    @property
    def targets(self) -> tuple[str, ...]:
        return tuple(self.gfx.split(";"))


class Release(Row):
    series: str
    status: Literal["ga", "unconfirmed"]
    python: tuple[str, ...] = Field(min_length=1)
    python_experimental: tuple[str, ...] = ()
    pypi_default_cuda: str
    min_glibc: str
    patch: tuple[PatchEntry, ...] = Field(min_length=1)
    cuda: tuple[CudaWheel, ...] = ()
    rocm: tuple[RocmWheel, ...] = ()

    @field_validator("series")
    @classmethod
    def _series(cls, v: str) -> str:
        return _check(_SERIES, v, "release series (X.Y)")

    @field_validator("python", "python_experimental")
    @classmethod
    def _py(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for item in v:
            _check(_SERIES, item, "Python version (3.X)")
        return v


def _requirements_on(name: str, lines: tuple[str, ...]) -> tuple[str, ...]:
    for line in lines:
        try:
            req = Requirement(line)
        except InvalidRequirement as exc:
            raise ValueError(f"{line!r} is not a requirement ({exc})") from None
        if canonicalize_name(req.name) != name:
            raise ValueError(f"{line!r} is not a requirement on {name}")
    return lines


class CompanionRelease(Row):
    """One torchvision / torchaudio release and the Requires-Dist lines on torch its metadata declares.

    ``requires_torch`` is verbatim from the wheel's METADATA; empty when the release declares no torch
    requirement (torchaudio 2.11.0), which makes it compatible with every torch by declaration.
    """

    name: Literal["torchvision", "torchaudio"]
    version: str
    requires_torch: tuple[str, ...] = ()

    @field_validator("version")
    @classmethod
    def _ver(cls, v: str) -> str:
        return _check(_VERSION, v, "version")

    @field_validator("requires_torch")
    @classmethod
    def _reqs(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return _requirements_on("torch", v)


class TorchRequires(Row):
    """A torch patch release's own Requires-Dist lines on triton (triton declares nothing about torch)."""

    torch: str
    triton: tuple[str, ...] = ()

    @field_validator("torch")
    @classmethod
    def _ver(cls, v: str) -> str:
        return _check(_VERSION, v, "version")

    @field_validator("triton")
    @classmethod
    def _reqs(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return _requirements_on("triton", v)


class TorchCatalog(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    index_url: str = Field(pattern=r"^https://[^\s]+\{variant\}$")
    index_source: str
    release: tuple[Release, ...] = Field(min_length=1)
    companion: tuple[CompanionRelease, ...] = ()
    torch_requires: tuple[TorchRequires, ...] = ()


class CudaFamily(Row):
    major: int
    driver: str = Field(pattern=_DRIVER.pattern)


class CudaToolkit(Row):
    variant: str = Field(pattern=_CUDA_VARIANT.pattern)
    version: str = Field(pattern=_SERIES.pattern)
    image_version: str = Field(pattern=r"^\d+\.\d+\.\d+$")
    image_tag: str = Field(pattern=r"^[0-9a-z.{}-]+$")
    image_os: tuple[OsId, ...] = Field(min_length=1)
    ga_driver: str = Field(pattern=_DRIVER.pattern)
    driver: str = Field(pattern=_DRIVER.pattern)

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])


class RocmImage(Row):
    repository: str
    tag: str
    complete_tag: str


class RocmVersion(Row):
    variant: str = Field(pattern=_ROCM_VARIANT.pattern)
    version: str = Field(pattern=_VERSION.pattern)
    image_tag: str = Field(pattern=r"^[0-9.]+$")
    image_os: tuple[OsId, ...] = Field(min_length=1)


class Toolkits(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    image_repository: str
    image_source: str
    family: tuple[CudaFamily, ...] = Field(min_length=1)
    cuda: tuple[CudaToolkit, ...] = Field(min_length=1)
    rocm_image: RocmImage
    rocm: tuple[RocmVersion, ...] = Field(min_length=1)


class OsEntry(Row):
    id: OsId
    name: str
    image: str
    release_id: str
    release_version: str
    codename: str = Field(pattern=r"^[a-z]+$")  # the suite name in apt sources ("bookworm", "noble")
    glibc: str = Field(pattern=r"^2\.\d+$")
    system_python: str = Field(pattern=_SERIES.pattern)
    deadsnakes: tuple[str, ...] = ()

    @property
    def pythons(self) -> tuple[str, ...]:
        return (self.system_python, *self.deadsnakes)


SNAPSHOT_RE = re.compile(r"^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$")


class AptSnapshot(Row):
    """A distribution's snapshot archive: ``{url}/{pocket with the snapshot after its archive}``."""

    release_id: str
    url: str = Field(pattern=r"^https?://[^\s\"']+[^/]$")
    pockets: tuple[str, ...] = Field(min_length=1)  # "ARCHIVE SUITE COMPONENT..." with {codename}
    since: str = Field(pattern=SNAPSHOT_RE.pattern)  # the first snapshot the service has

    def lines(self, codename: str, snapshot: str, mirror: str) -> tuple[str, ...]:
        """One-line apt sources for ``snapshot``, ``mirror`` standing for :attr:`url`."""
        out = []
        for pocket in self.pockets:
            archive, suite_components = pocket.format(codename=codename).split(" ", 1)
            out.append(f"deb [check-valid-until=no] {mirror}/{archive}/{snapshot} {suite_components}")
        return tuple(out)


class BlenderSeries(Row):
    series: str = Field(pattern=_SERIES.pattern)
    cuda_cubins: tuple[str, ...]
    cuda_ptx: str | None = Field(default=None, pattern=r"^compute_\d+$")
    cuda_min_cc: str = Field(pattern=r"^\d+\.\d$")
    optix_min_cc: str = Field(pattern=r"^\d+\.\d$")
    optix_min_driver: str = Field(pattern=_DRIVER.pattern)
    hip_min_major: int
    hip_kernels: tuple[str, ...]
    # Patch releases known to be published (X.Y.Z, oldest first); not exhaustive, so a version missing
    # from the list is not refused.  releases_source says where the list was read (required with it).
    releases: tuple[str, ...] = ()
    releases_source: str | None = None
    # The CPython X.Y of the series' bpy wheels on PyPI (Requires-Python ==X.Y.*, cpXY tags); None: no
    # manylinux bpy wheel is published for the series, so blender.source = "pypi" cannot install it.
    bpy_python: str | None = Field(default=None, pattern=r"^3\.\d{1,2}$")

    @model_validator(mode="after")
    def _releases(self) -> BlenderSeries:
        for item in self.releases:
            if not re.match(r"^\d+\.\d+\.\d+$", item) or not item.startswith(self.series + "."):
                raise ValueError(f"releases: {item!r} is not an X.Y.Z release of series {self.series}")
        keys = [tuple(int(x) for x in item.split(".")) for item in self.releases]
        if keys != sorted(set(keys)):
            raise ValueError("releases must be increasing, each once")
        if self.releases and not self.releases_source:
            raise ValueError("releases_source is required with releases")
        if self.bpy_python and not self.releases_source:
            raise ValueError("releases_source is required with bpy_python (it says where both were read)")
        return self

    @property
    def newest_release(self) -> str | None:
        return self.releases[-1] if self.releases else None

    @field_validator("cuda_cubins")
    @classmethod
    def _cubins(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for item in v:
            _check(_SM, item, "sm_XY cubin")
        return v

    @field_validator("hip_kernels")
    @classmethod
    def _hip(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for item in v:
            _check(_GFX, item, "gfx target")
        return v


class BlenderCatalog(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str = Field(pattern=r"^https://[^\s]+$")
    sha256_url: str = Field(pattern=r"^https://[^\s]+$")
    url_tier: Tier
    url_source: str
    runtime_apt: tuple[str, ...]
    runtime_apt_source: str
    series: tuple[BlenderSeries, ...] = Field(min_length=1)

    @field_validator("runtime_apt")
    @classmethod
    def _apt(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for item in v:
            _check(_APT, item, "apt package name")
        return v
