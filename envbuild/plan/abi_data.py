"""The data behind the ABI checks (``envbuild/data/abi.toml``): typed rows, each with its source.

Read once per process and validated like every catalog file; a malformed row raises CatalogError.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from envbuild.boundary import INPUT
from envbuild.catalog import loader
from envbuild.catalog.rows import Row, fail, not_empty, shape
from envbuild.resources import catalog_dir

_SERIES = re.compile(r"^\d+\.\d+$")
_FLASH_ATTN_URL = re.compile(r"^https://\S+\{version\}\S*\.whl$")


def versions(key: str, values: Iterable[str | None]) -> None:
    """Each value (None skipped) is a PEP 440 version."""
    from packaging.version import InvalidVersion, Version  # on a cache miss only

    for value in values:
        try:
            if value is not None:
                Version(value)
        except InvalidVersion:
            fail(key, f"{value!r} is not a PEP 440 version")


def specifier(key: str, value: str) -> None:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet  # on a cache miss only

    try:
        SpecifierSet(value)
    except InvalidSpecifier:
        fail(key, f"{value!r} is not a PEP 440 specifier")


def series(key: str, values: Iterable[str]) -> None:
    for value in values:
        shape(key, value, _SERIES, "torch series (X.Y)")


@dataclass(frozen=True, kw_only=True)
class CxxAbiRule(Row):
    torch: str  # a PEP 440 specifier on the plan's torch release
    variants: tuple[str, ...] = ()  # empty: every variant
    abi: bool

    def __post_init__(self) -> None:
        super().__post_init__()
        specifier("torch", self.torch)


@dataclass(frozen=True, kw_only=True)
class TorchRequirement(Row):
    version: str
    torch: str  # Requires-Dist on torch, a PEP 440 specifier ("" = any torch)

    def __post_init__(self) -> None:
        super().__post_init__()
        versions("version", (self.version,))
        specifier("torch", self.torch)


@dataclass(frozen=True, kw_only=True)
class BitsandbytesRelease(TorchRequirement):
    gpu_libraries: tuple[str, ...]  # "cuda128", "rocm63": libbitsandbytes_<name>.so in the wheel


@dataclass(frozen=True, kw_only=True)
class TorchaoRelease(Row):
    version: str
    kernels_torch: tuple[str, ...] = ()
    kernels_min_torch: str | None = None
    kernels_match: Literal["patch", "series"] = "patch"
    python_api_torch: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        versions("version", (self.version,))
        versions("kernels_torch", self.kernels_torch)
        versions("kernels_min_torch", (self.kernels_min_torch,))
        versions("python_api_torch", self.python_api_torch or ())


@dataclass(frozen=True, kw_only=True)
class FlashAttnRelease(Row):
    version: str
    torch: tuple[str, ...]
    cuda: tuple[int, ...]
    python: tuple[str, ...]
    cxx11_abi: tuple[bool, ...]
    exclude: tuple[str, ...] = ()  # "torch/python" pairs the release matrix leaves out

    def __post_init__(self) -> None:
        super().__post_init__()
        versions("version", (self.version,))
        for key in ("torch", "cuda", "python", "cxx11_abi"):
            not_empty(key, getattr(self, key))
        series("torch", self.torch)
        series("python", self.python)


@dataclass(frozen=True, kw_only=True)
class PygWheels(Row):
    package: Literal["torch-scatter", "torch-sparse", "torch-cluster"]
    torch: str
    variants: tuple[str, ...]

    def __post_init__(self) -> None:
        super().__post_init__()
        series("torch", (self.torch,))
        not_empty("variants", self.variants)


@dataclass(frozen=True, kw_only=True)
class AbiData:
    __pydantic_config__ = INPUT  # read from outside: see envbuild.boundary

    flash_attn_url: str
    flash_attn_url_source: str
    cxx11_abi: tuple[CxxAbiRule, ...]
    flash_attn: tuple[FlashAttnRelease, ...] = ()
    pyg: tuple[PygWheels, ...] = ()
    torchao: tuple[TorchaoRelease, ...] = ()
    xformers: tuple[TorchRequirement, ...] = ()
    bitsandbytes: tuple[BitsandbytesRelease, ...] = ()

    def __post_init__(self) -> None:
        shape(
            "flash_attn_url",
            self.flash_attn_url,
            _FLASH_ATTN_URL,
            "wheel URL template (https://...{version}...whl)",
        )
        if len(self.flash_attn_url_source) < 3:
            fail("flash_attn_url_source", "must be at least 3 characters")
        not_empty("cxx11_abi", self.cxx11_abi)


@cache
def _read(path: Path) -> AbiData:
    return loader._load(path, AbiData)


def load_abi_data(path: Path | None = None) -> AbiData:
    """Read (once, cached) and validate ``abi.toml``; malformed rows raise CatalogError."""
    return _read((path or catalog_dir() / "abi.toml").resolve())
