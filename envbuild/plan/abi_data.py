"""The data behind the ABI checks (``envbuild/data/abi.toml``): typed rows, each with its source.

Read once per process and validated like every catalog file; a malformed row raises CatalogError.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Annotated, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from envbuild.catalog import loader
from envbuild.catalog.models import Row
from envbuild.resources import catalog_dir


def _version(value: str) -> str:
    try:
        Version(value)
    except InvalidVersion:
        raise ValueError(f"{value!r} is not a PEP 440 version") from None
    return value


def _specifier(value: str) -> str:
    try:
        SpecifierSet(value)
    except InvalidSpecifier:
        raise ValueError(f"{value!r} is not a PEP 440 specifier") from None
    return value


def _series(value: str) -> str:
    if not re.fullmatch(r"\d+\.\d+", value):
        raise ValueError(f"{value!r} is not a torch series (X.Y)")
    return value


VersionText = Annotated[str, AfterValidator(_version)]
SpecifierText = Annotated[str, AfterValidator(_specifier)]
Series = Annotated[str, AfterValidator(_series)]


class CxxAbiRule(Row):
    torch: SpecifierText  # on the plan's torch release
    variants: tuple[str, ...] = ()  # empty: every variant
    abi: bool


class TorchRequirement(Row):
    version: VersionText
    torch: SpecifierText  # Requires-Dist on torch ("" = any torch)


class BitsandbytesRelease(TorchRequirement):
    gpu_libraries: tuple[str, ...]  # "cuda128", "rocm63": libbitsandbytes_<name>.so in the wheel


class TorchaoRelease(Row):
    version: VersionText
    kernels_torch: tuple[VersionText, ...] = ()
    kernels_min_torch: VersionText | None = None
    kernels_match: Literal["patch", "series"] = "patch"
    python_api_torch: tuple[VersionText, ...] | None = None


class FlashAttnRelease(Row):
    version: VersionText
    torch: tuple[Series, ...] = Field(min_length=1)
    cuda: tuple[int, ...] = Field(min_length=1)
    python: tuple[Series, ...] = Field(min_length=1)
    cxx11_abi: tuple[bool, ...] = Field(min_length=1)
    exclude: tuple[str, ...] = ()  # "torch/python" pairs the release matrix leaves out


class PygWheels(Row):
    package: Literal["torch-scatter", "torch-sparse", "torch-cluster"]
    torch: Series
    variants: tuple[str, ...] = Field(min_length=1)


class AbiData(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    flash_attn_url: str = Field(pattern=r"^https://\S+\{version\}\S*\.whl$")
    flash_attn_url_source: str = Field(min_length=3)
    cxx11_abi: tuple[CxxAbiRule, ...] = Field(min_length=1)
    flash_attn: tuple[FlashAttnRelease, ...] = ()
    pyg: tuple[PygWheels, ...] = ()
    torchao: tuple[TorchaoRelease, ...] = ()
    xformers: tuple[TorchRequirement, ...] = ()
    bitsandbytes: tuple[BitsandbytesRelease, ...] = ()


@cache
def _read(path: Path) -> AbiData:
    return loader._load(path, AbiData)


def load_abi_data(path: Path | None = None) -> AbiData:
    """Read (once, cached) and validate ``abi.toml``; malformed rows raise CatalogError."""
    return _read((path or catalog_dir() / "abi.toml").resolve())
