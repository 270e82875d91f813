"""Rows of ``toolkits.toml``: CUDA driver families and toolkits, ROCm versions, their base images."""

from __future__ import annotations

import re
from dataclasses import dataclass

from envbuild.boundary import INPUT
from envbuild.catalog.rows import CUDA_VARIANT, DRIVER, ROCM_VARIANT, SERIES, VERSION, Row, not_empty, shape
from envbuild.models import OsId

_IMAGE_VERSION = re.compile(r"^\d+\.\d+\.\d+$")
_IMAGE_TAG = re.compile(r"^[0-9a-z.{}-]+$")
_ROCM_IMAGE_TAG = re.compile(r"^[0-9.]+$")


@dataclass(frozen=True, kw_only=True)
class CudaFamily(Row):
    major: int
    driver: str

    def __post_init__(self) -> None:
        super().__post_init__()
        shape("driver", self.driver, DRIVER, "driver version")


@dataclass(frozen=True, kw_only=True)
class CudaToolkit(Row):
    variant: str
    version: str
    image_version: str
    image_tag: str
    image_os: tuple[OsId, ...]
    ga_driver: str
    driver: str
    # CUDA 13: the cuda-toolkit release torch's builds of this variant require on the package index, whose
    # nvcc/cccl wheels the builder stage installs (one nvidia/cuNN prefix); None: nvidia/cuda's devel image
    toolkit_wheels: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        shape("toolkit_wheels", self.toolkit_wheels, _IMAGE_VERSION, "cuda-toolkit release (X.Y.Z)")
        shape("variant", self.variant, CUDA_VARIANT, "CUDA wheel variant (cuNNN)")
        shape("version", self.version, SERIES, "CUDA version (X.Y)")
        shape("image_version", self.image_version, _IMAGE_VERSION, "image version (X.Y.Z)")
        shape("image_tag", self.image_tag, _IMAGE_TAG, "image tag template")
        not_empty("image_os", self.image_os)
        shape("ga_driver", self.ga_driver, DRIVER, "driver version")
        shape("driver", self.driver, DRIVER, "driver version")

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
        shape("variant", self.variant, ROCM_VARIANT, "ROCm wheel variant (rocmX.Y[.Z])")
        shape("version", self.version, VERSION, "version")
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
