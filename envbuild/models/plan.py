"""The plan and its findings (the output of :mod:`envbuild.plan`'s ``check``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from envbuild.boundary import INPUT
from envbuild.errors import one_line_message
from envbuild.models.cards import Card, LotPrice
from envbuild.models.profile import Backend, BlenderSource, OsId, Profile, RequirementLine

Severity = Literal["error", "warning", "info"]


# --------------------------------------------------------------------------------------------------
# Plan (output of envbuild.plan)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One finding, on one line: ``message`` and ``source`` are made one line on construction (a tool's
    multi-line text quoted in it too), see :func:`envbuild.errors.one_line_message`."""

    severity: Severity
    code: str  # stable, e.g. "E-ARCH-MISSING", "W-DRIVER-UNKNOWN"
    message: str  # what is wrong and what to write instead; no internal citations
    source: str | None = None  # where the facts behind it come from (catalog row, metadata, URL)

    def __post_init__(self) -> None:
        object.__setattr__(self, "message", one_line_message(self.message))
        if self.source is not None:
            object.__setattr__(self, "source", one_line_message(self.source))


@dataclass(frozen=True, kw_only=True)
class IndexUrl:
    url: str
    reason: str
    primary: bool = False  # --index-url (True) or --extra-index-url (False)


@dataclass(frozen=True, kw_only=True)
class Pin:
    name: str  # canonical project name
    version: str  # "2.7.1"
    local: str | None = None  # "cu128", "rocm6.3", "cpu"
    reason: str  # provenance: "torch release 2.7.1, variant cu128 (catalog: ...)"

    @property
    def spec(self) -> str:
        return f"{self.name}=={self.version}" + (f"+{self.local}" if self.local else "")


@dataclass(frozen=True, kw_only=True)
class Plan:
    __pydantic_config__ = INPUT  # read from outside: see envbuild.boundary

    profile: Profile
    targets: tuple[Card, ...]
    os: OsId
    os_name: str  # "Ubuntu 24.04"
    base_image: str  # derived or explicit
    base_flavor: str  # "os", "cuda-runtime", "cuda-devel", "rocm-dev", "rocm-complete", "explicit"
    python_version: str
    python_provision: str  # "system" (distro python3) | "deadsnakes" | "base-image"
    backend: Backend
    accelerator_version: str | None  # "12.8" | "6.3" | None
    torch_variant: str | None  # "cu128" | "rocm6.3" | "cpu" | None when no torch
    torch_version: str | None
    index_urls: tuple[IndexUrl, ...]
    pins: tuple[Pin, ...]  # torch family, exact with local tag
    requirements: tuple[RequirementLine, ...]  # the user's, after pins
    apt: tuple[str, ...]  # sorted, deduplicated
    torch_arch_list: tuple[str, ...]  # what the wheel carries: ("sm_75", ..., "sm_120+PTX")
    required_archs: tuple[str, ...]  # what the targets need
    min_driver: str | None  # NVIDIA Linux driver minimum for the variant
    compiles: bool  # something is compiled in the final image (toolchain present, devel base)
    blender_version: str | None
    blender_url: str | None
    blender_sha256_url: str | None
    blender_source: BlenderSource | None = None  # None: no Blender
    days: int | None = None  # the rental duration chosen (--days); None: every duration is shown
    prices: tuple[LotPrice, ...] = ()  # lot prices known for the targets (built-in, then --prices)
    # (package, version) recorded by a first build (render --apt-from RECORD): unpinned apt packages of
    # the image are installed at exactly these versions.
    apt_recorded: tuple[tuple[str, str], ...] = ()
    # [system] snapshot: the instant, and the apt sources lines reading it (the archive URL as
    # ${APT_SNAPSHOT_MIRROR}, a build argument); () without a snapshot.
    apt_snapshot: str | None = None
    apt_sources: tuple[str, ...] = ()
    apt_snapshot_url: str | None = None  # the service (APT_SNAPSHOT_MIRROR's default)
    # [python] build_from_source on CUDA/ROCm: the builder stage's devel image (nvcc/hipcc); None: the
    # builder stage uses the base image
    builder_image: str | None = None
    # CUDA 13: the cuda-toolkit release whose nvcc/cccl wheels the builder stage installs into its own prefix
    # (the catalog's until resolution, then the one the resolved torch requires; `envbuild lock` pins it in
    # requirements-toolkit.txt); None: the builder compiles no CUDA code, or compiles it on builder_image
    builder_toolkit: str | None = None
    # The validator's ops compiled in the builder stage: "cpp", plus "cuda"/"rocm" where the builder has
    # nvcc/hipcc (validate.probe_ops; torch in the plan).
    probe_ops: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class CheckResult:
    plan: Plan
    findings: tuple[Finding, ...]

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)
