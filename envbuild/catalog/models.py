"""Typed, frozen rows of the catalog (the TOML files in ``envbuild/data/``).

Every row carries ``tier`` (P primary, S secondary, unconfirmed) and ``source`` (the citation copied
from the design's compat-facts).  The rows are frozen dataclasses: a file is validated once, on a cache
miss, by :func:`envbuild.boundary.parse` (types, literals, unknown keys) and each row's ``__post_init__``
(shapes and ranges), so the planner can rely on shapes (``sm_90``, ``gfx942``, ``570.124.06``,
``cu128``, ``rocm6.2.4``).  A ``ValueError`` here names the key it is about.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sized
from dataclasses import dataclass
from typing import Literal, NoReturn

from envbuild.boundary import INPUT
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

_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_IMAGE_VERSION = re.compile(r"^\d+\.\d+\.\d+$")
_IMAGE_TAG = re.compile(r"^[0-9a-z.{}-]+$")
_ROCM_IMAGE_TAG = re.compile(r"^[0-9.]+$")
_CODENAME = re.compile(r"^[a-z]+$")
_GLIBC = re.compile(r"^2\.\d+$")
_CC = re.compile(r"^\d+\.\d$")
_PTX = re.compile(r"^compute_\d+$")
_BPY_PYTHON = re.compile(r"^3\.\d{1,2}$")
_HTTPS = re.compile(r"^https://[^\s]+$")
_RELEASE = re.compile(r"^\d+\.\d+\.\d+$")


# ---- the checks a type cannot state; each raises ValueError("key: problem") ------------------------


def fail(key: str, problem: str) -> NoReturn:
    raise ValueError(f"{key}: {problem}")


def _check(pattern: re.Pattern[str], value: str, what: str) -> str:
    if not pattern.match(value):
        raise ValueError(f"{value!r} is not a valid {what}")
    return value


def shape(key: str, value: str | None, pattern: re.Pattern[str], what: str) -> None:
    """``value`` (unless None) matches ``pattern``."""
    if value is not None and not pattern.match(value):
        fail(key, f"{value!r} is not a valid {what}")


def shapes(key: str, values: Iterable[str], pattern: re.Pattern[str], what: str) -> None:
    for value in values:
        shape(key, value, pattern, what)


def at_least(key: str, value: float, low: float) -> None:
    if value < low:
        fail(key, f"must be at least {low:g}, got {value:g}")


def at_most(key: str, value: float, high: float) -> None:
    if value > high:
        fail(key, f"must be at most {high:g}, got {value:g}")


def not_empty(key: str, value: Sized) -> None:
    if not value:
        fail(key, "must not be empty")


def text(key: str, value: str, min_length: int = 3) -> None:
    if len(value) < min_length:
        fail(key, f"must be at least {min_length} characters, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class Row:
    tier: Tier
    source: str

    def __post_init__(self) -> None:
        text("source", self.source)


def sm_cc(arch: str) -> tuple[int, int]:
    """``sm_89`` -> (8, 9); ``sm_120`` -> (12, 0)."""
    m = _SM.match(arch)
    if not m:
        raise ValueError(f"{arch!r} is not an sm_XY arch")
    return int(m.group(1)), int(m.group(2))


@dataclass(frozen=True, kw_only=True)
class CardEntry(Row, Devices):
    id: str
    name: str
    vendor: Vendor
    arch: str
    memory_gib: float
    cards_per_lot: int
    bf16_tflops: float | None = None
    bandwidth_gbs: float | None = None
    min_cuda: str | None = None
    min_rocm: str | None = None
    min_rocm_tier: Tier = "P"
    min_driver: str | None = None
    host_arch: Literal["x86_64", "aarch64"] = "x86_64"
    devices_per_card: int = 1  # MI250X: 2 GCDs, each its own device
    device_memory_gib: float | None = None  # required when devices_per_card > 1

    def __post_init__(self) -> None:
        super().__post_init__()
        shape("id", self.id, _ID, "card id (lower-case letters, digits and dashes)")
        at_least("memory_gib", self.memory_gib, 0)
        at_least("cards_per_lot", self.cards_per_lot, 1)
        at_most("cards_per_lot", self.cards_per_lot, 16)
        at_least("devices_per_card", self.devices_per_card, 1)
        at_most("devices_per_card", self.devices_per_card, 8)
        if not (self.arch == "" or _SM.match(self.arch) or _GFX.match(self.arch)):
            fail("arch", f"{self.arch!r} is not an arch (sm_XY, gfxNNN, or empty for cpu)")
        shape("min_cuda", self.min_cuda, _VERSION, "version")
        shape("min_rocm", self.min_rocm, _VERSION, "version")
        shape("min_driver", self.min_driver, _DRIVER, "driver version")
        if self.device_memory_gib is not None and not self.device_memory_gib > 0:
            fail("device_memory_gib", f"must be above 0, got {self.device_memory_gib:g}")
        if self.devices_per_card > 1 and self.device_memory_gib is None:
            fail("device_memory_gib", "is required when devices_per_card > 1")
        if self.device_memory_gib is not None and not math.isclose(
            self.device_memory_gib * self.devices_per_card, self.memory_gib
        ):
            fail(
                "device_memory_gib",
                f"devices_per_card x device_memory_gib = {self.devices_per_card} x "
                f"{self.device_memory_gib:g} GiB is not memory_gib ({self.memory_gib:g} GiB)",
            )

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


@dataclass(frozen=True, kw_only=True)
class ReserveEntry(Row):
    """GiB of each device a job cannot use: the runtime context each process creates there."""

    vendor: Literal["nvidia", "amd"]
    gib: float
    what: str  # "the CUDA context", for messages
    cite: str  # a short citation, for messages

    def __post_init__(self) -> None:
        super().__post_init__()
        at_least("gib", self.gib, 0)
        if not self.gib < 16:
            fail("gib", f"must be below 16, got {self.gib:g}")
        text("what", self.what)
        text("cite", self.cite)


_DATE = re.compile(r"^\d{4}-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?$")


def check_date(value: str) -> str:
    """``2026-12`` or ``2026-12-15`` (a price's date: when it was read)."""
    return _check(_DATE, value, "date (YYYY-MM-DD or YYYY-MM)")


@dataclass(frozen=True, kw_only=True)
class Terms(Row):
    """The provider's rental terms: durations and how many lots one order may hold."""

    provider: str
    days: tuple[int, ...]
    min_lots: int
    max_lots: int
    cite: str

    def __post_init__(self) -> None:
        super().__post_init__()
        text("provider", self.provider, 2)
        not_empty("days", self.days)
        at_least("min_lots", self.min_lots, 1)
        at_least("max_lots", self.max_lots, 1)
        text("cite", self.cite)
        if self.max_lots < self.min_lots:
            fail("max_lots", f"{self.max_lots} is below min_lots {self.min_lots}")
        if any(d < 1 for d in self.days) or list(self.days) != sorted(set(self.days)):
            fail("days", f"must be increasing positive numbers, got {list(self.days)}")


@dataclass(frozen=True, kw_only=True)
class PriceEntry(Row):
    """One card's lot prices: days -> USD for one lot (all the lot's cards) for that duration."""

    card: str
    usd: dict[int, float]
    date: str
    cite: str

    def __post_init__(self) -> None:
        super().__post_init__()
        not_empty("usd", self.usd)
        bad = [f"{days}: {usd!r}" for days, usd in self.usd.items() if not usd > 0]
        if bad:
            fail("usd", f"USD per lot must be positive ({', '.join(bad)})")
        shape("date", self.date, _DATE, "date (YYYY-MM-DD or YYYY-MM)")
        text("cite", self.cite)


@dataclass(frozen=True, kw_only=True)
class PatchEntry(Row):
    version: str
    torchvision: str
    torchaudio: str | None = None
    triton: str

    def __post_init__(self) -> None:
        super().__post_init__()
        for key in ("version", "torchvision", "torchaudio", "triton"):
            shape(key, getattr(self, key), _VERSION, "version")


@dataclass(frozen=True, kw_only=True)
class CudaWheel(Row):
    variant: str
    arch_list: str  # TORCH_CUDA_ARCH_LIST as written upstream: "7.5;8.0;...;12.0+PTX"
    only_patches: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        shape("variant", self.variant, _CUDA_VARIANT, "CUDA wheel variant (cuNNN)")
        items = self.arch_list.split(";")
        shapes("arch_list", items, _ARCH_ITEM, "TORCH_CUDA_ARCH_LIST entry (X.Y or X.Y+PTX)")
        if any("+PTX" in item for item in items[:-1]):
            fail("arch_list", "+PTX may only follow the last arch")

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


@dataclass(frozen=True, kw_only=True)
class RocmWheel(Row):
    variant: str
    gfx: str

    def __post_init__(self) -> None:
        super().__post_init__()
        shape("variant", self.variant, _ROCM_VARIANT, "ROCm wheel variant (rocmX.Y[.Z])")
        shapes("gfx", self.gfx.split(";"), _GFX, "gfx target")

    @property
    def targets(self) -> tuple[str, ...]:
        return tuple(self.gfx.split(";"))


@dataclass(frozen=True, kw_only=True)
class Release(Row):
    series: str
    status: Literal["ga", "unconfirmed"]
    python: tuple[str, ...]
    python_experimental: tuple[str, ...] = ()
    pypi_default_cuda: str
    min_glibc: str
    patch: tuple[PatchEntry, ...]
    cuda: tuple[CudaWheel, ...] = ()
    rocm: tuple[RocmWheel, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        shape("series", self.series, _SERIES, "release series (X.Y)")
        not_empty("python", self.python)
        shapes("python", self.python, _SERIES, "Python version (3.X)")
        shapes("python_experimental", self.python_experimental, _SERIES, "Python version (3.X)")
        not_empty("patch", self.patch)


def _requirements_on(key: str, name: str, lines: tuple[str, ...]) -> None:
    from packaging.requirements import InvalidRequirement, Requirement  # on a cache miss only
    from packaging.utils import canonicalize_name

    for line in lines:
        try:
            req = Requirement(line)
        except InvalidRequirement as exc:
            fail(key, f"{line!r} is not a requirement ({exc})")
        if canonicalize_name(req.name) != name:
            fail(key, f"{line!r} is not a requirement on {name}")


@dataclass(frozen=True, kw_only=True)
class CompanionRelease(Row):
    """One torchvision / torchaudio release and the Requires-Dist lines on torch its metadata declares.

    ``requires_torch`` is verbatim from the wheel's METADATA; empty when the release declares no torch
    requirement (torchaudio 2.11.0), which makes it compatible with every torch by declaration.
    """

    name: Literal["torchvision", "torchaudio"]
    version: str
    requires_torch: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        shape("version", self.version, _VERSION, "version")
        _requirements_on("requires_torch", "torch", self.requires_torch)


@dataclass(frozen=True, kw_only=True)
class TorchRequires(Row):
    """A torch patch release's own Requires-Dist lines on triton (triton declares nothing about torch)."""

    torch: str
    triton: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        shape("torch", self.torch, _VERSION, "version")
        _requirements_on("triton", "triton", self.triton)
        # the markers read once, here (a cache miss), for each Python an image may have; the answers
        # travel with the row in the catalog cache, so a cold check evaluates no marker
        self.__dict__["_on_image"] = _on_image(self.triton, _IMAGE_PYTHONS)

    def triton_on_image(self, python: str) -> tuple[tuple[str, str], ...]:
        """The triton lines whose environment markers hold on the image (CPython ``python``, x86_64
        Linux), each as ``(line as packaging writes it, the requirement without its marker)``."""
        known: dict[str, tuple[tuple[str, str], ...]] = self.__dict__.get("_on_image", {})
        return known[python] if python in known else _on_image(self.triton, (python,))[python]


_IMAGE_PYTHONS = tuple(f"3.{minor}" for minor in range(8, 21))


def _on_image(lines: tuple[str, ...], pythons: tuple[str, ...]) -> dict[str, tuple[tuple[str, str], ...]]:
    from packaging.requirements import Requirement  # on a cache miss only

    from envbuild.plan.versions import applies_on_image

    reqs = [Requirement(line) for line in lines]  # each line's marker evaluated per Python
    bare = [Requirement(line) for line in lines]  # the same, shown without its marker
    for req in bare:
        req.marker = None
    shown = [(str(req), str(plain)) for req, plain in zip(reqs, bare, strict=True)]
    return {
        python: tuple(pair for req, pair in zip(reqs, shown, strict=True) if applies_on_image(req, python))
        for python in pythons
    }


_INDEX_URL = re.compile(r"^https://[^\s]+\{variant\}$")


@dataclass(frozen=True, kw_only=True)
class TorchCatalog:
    __pydantic_config__ = INPUT  # read from outside: see envbuild.boundary

    index_url: str
    index_source: str
    release: tuple[Release, ...]
    companion: tuple[CompanionRelease, ...] = ()
    torch_requires: tuple[TorchRequires, ...] = ()

    def __post_init__(self) -> None:
        shape("index_url", self.index_url, _INDEX_URL, "index URL (https://...{variant})")
        not_empty("release", self.release)
        _check_companions(self)


def _duplicate(kind: str, keys: list[str]) -> None:
    seen: set[str] = set()
    for i, key in enumerate(keys):
        if key in seen:
            fail(f"{kind}[{i}]", f"duplicate {key!r}")
        seen.add(key)


def _check_companions(torch: TorchCatalog) -> None:
    """Every [[release.patch]] companion with a [[companion]] row must be one its metadata allows."""
    from packaging.requirements import Requirement  # on a cache miss only
    from packaging.version import Version

    _duplicate("companion", [f"{c.name} {c.version}" for c in torch.companion])
    _duplicate("torch_requires", [t.torch for t in torch.torch_requires])
    rows: dict[tuple[str, str], CompanionRelease] = {(c.name, c.version): c for c in torch.companion}
    for rel in torch.release:
        for patch in rel.patch:
            for name, version in (("torchvision", patch.torchvision), ("torchaudio", patch.torchaudio)):
                row = rows.get((name, version or ""))
                bad = [
                    line
                    for line in (row.requires_torch if row else ())
                    if not Requirement(line).specifier.contains(Version(patch.version), prereleases=True)
                ]
                if bad:
                    fail(
                        f"patch {patch.version}",
                        f"{name} {version} requires {bad[0]!r} (its [[companion]] row), which excludes "
                        "this torch",
                    )


@dataclass(frozen=True, kw_only=True)
class CudaFamily(Row):
    major: int
    driver: str

    def __post_init__(self) -> None:
        super().__post_init__()
        shape("driver", self.driver, _DRIVER, "driver version")


@dataclass(frozen=True, kw_only=True)
class CudaToolkit(Row):
    variant: str
    version: str
    image_version: str
    image_tag: str
    image_os: tuple[OsId, ...]
    ga_driver: str
    driver: str

    def __post_init__(self) -> None:
        super().__post_init__()
        shape("variant", self.variant, _CUDA_VARIANT, "CUDA wheel variant (cuNNN)")
        shape("version", self.version, _SERIES, "CUDA version (X.Y)")
        shape("image_version", self.image_version, _IMAGE_VERSION, "image version (X.Y.Z)")
        shape("image_tag", self.image_tag, _IMAGE_TAG, "image tag template")
        not_empty("image_os", self.image_os)
        shape("ga_driver", self.ga_driver, _DRIVER, "driver version")
        shape("driver", self.driver, _DRIVER, "driver version")

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])


@dataclass(frozen=True, kw_only=True)
class RocmImage(Row):
    repository: str
    tag: str
    complete_tag: str


@dataclass(frozen=True, kw_only=True)
class RocmVersion(Row):
    variant: str
    version: str
    image_tag: str
    image_os: tuple[OsId, ...]

    def __post_init__(self) -> None:
        super().__post_init__()
        shape("variant", self.variant, _ROCM_VARIANT, "ROCm wheel variant (rocmX.Y[.Z])")
        shape("version", self.version, _VERSION, "version")
        shape("image_tag", self.image_tag, _ROCM_IMAGE_TAG, "ROCm image tag (digits and dots)")
        not_empty("image_os", self.image_os)


@dataclass(frozen=True, kw_only=True)
class ContainerEnv(Row):
    """What NVIDIA's images set for the container toolkit, set by the Dockerfile on a plain OS base."""

    require: str  # NVIDIA_REQUIRE_CUDA, {version} = the plan's CUDA X.Y
    capabilities: str  # NVIDIA_DRIVER_CAPABILITIES
    graphics_capabilities: str  # the same for Blender (OptiX needs the driver's graphics libraries)

    def __post_init__(self) -> None:
        super().__post_init__()
        if "{version}" not in self.require:
            raise ValueError(f"require: {self.require!r} does not name {{version}}")

    def require_cuda(self, version: str) -> str:
        return self.require.format(version=version)


@dataclass(frozen=True, kw_only=True)
class RocmTools(Row):
    """The vendor tools the validator reads on AMD machines, for which a ROCm plan keeps a ROCm base."""

    tools: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class Toolkits:
    __pydantic_config__ = INPUT  # read from outside: see envbuild.boundary

    image_repository: str
    image_source: str
    container_env: ContainerEnv
    family: tuple[CudaFamily, ...]
    cuda: tuple[CudaToolkit, ...]
    rocm_image: RocmImage
    rocm_tools: RocmTools
    rocm: tuple[RocmVersion, ...]

    def __post_init__(self) -> None:
        for key in ("family", "cuda", "rocm"):
            not_empty(key, getattr(self, key))


@dataclass(frozen=True, kw_only=True)
class OsEntry(Row):
    id: OsId
    name: str
    image: str
    release_id: str
    release_version: str
    codename: str  # the suite name in apt sources ("bookworm", "noble")
    glibc: str
    system_python: str
    deadsnakes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        shape("codename", self.codename, _CODENAME, "suite name (lower-case letters)")
        shape("glibc", self.glibc, _GLIBC, "glibc version (2.N)")
        shape("system_python", self.system_python, _SERIES, "Python version (3.X)")

    @property
    def pythons(self) -> tuple[str, ...]:
        return (self.system_python, *self.deadsnakes)


SNAPSHOT_RE = re.compile(r"^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$")
_SNAPSHOT_URL = re.compile(r"^https?://[^\s\"']+[^/]$")


@dataclass(frozen=True, kw_only=True)
class AptSnapshot(Row):
    """A distribution's snapshot archive: ``{url}/{pocket with the snapshot after its archive}``."""

    release_id: str
    url: str
    pockets: tuple[str, ...]  # "ARCHIVE SUITE COMPONENT..." with {codename}
    since: str  # the first snapshot the service has

    def __post_init__(self) -> None:
        super().__post_init__()
        shape("url", self.url, _SNAPSHOT_URL, "archive URL (http(s)://..., no trailing slash)")
        not_empty("pockets", self.pockets)
        shape("since", self.since, SNAPSHOT_RE, "snapshot instant (YYYYMMDDTHHMMSSZ)")

    def lines(self, codename: str, snapshot: str, mirror: str) -> tuple[str, ...]:
        """One-line apt sources for ``snapshot``, ``mirror`` standing for :attr:`url`."""
        out = []
        for pocket in self.pockets:
            archive, suite_components = pocket.format(codename=codename).split(" ", 1)
            out.append(f"deb [check-valid-until=no] {mirror}/{archive}/{snapshot} {suite_components}")
        return tuple(out)


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
        shape("series", self.series, _SERIES, "Blender series (X.Y)")
        shapes("cuda_cubins", self.cuda_cubins, _SM, "sm_XY cubin")
        shape("cuda_ptx", self.cuda_ptx, _PTX, "PTX target (compute_NN)")
        shape("cuda_min_cc", self.cuda_min_cc, _CC, "compute capability (X.Y)")
        shape("optix_min_cc", self.optix_min_cc, _CC, "compute capability (X.Y)")
        shape("optix_min_driver", self.optix_min_driver, _DRIVER, "driver version")
        shapes("hip_kernels", self.hip_kernels, _GFX, "gfx target")
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
class BlenderCatalog:
    __pydantic_config__ = INPUT  # read from outside: see envbuild.boundary

    url: str
    sha256_url: str
    url_tier: Tier
    url_source: str
    runtime_apt: tuple[str, ...]
    runtime_apt_source: str
    series: tuple[BlenderSeries, ...]

    def __post_init__(self) -> None:
        shape("url", self.url, _HTTPS, "https URL")
        shape("sha256_url", self.sha256_url, _HTTPS, "https URL")
        shapes("runtime_apt", self.runtime_apt, _APT, "apt package name")
        not_empty("series", self.series)
