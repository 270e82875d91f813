"""What the ABI checks (:mod:`envbuild.plan.abi`) compare: the plan's torch, accelerator and C++ ABI
(:class:`_Plan`), a wheel's build read from its local version label (:class:`_Build`), and their wording."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envbuild.plan.abi_data import (
    AbiData,
    FlashAttnRelease,
    TorchaoRelease,
    TorchRequirement,
)


def _row(rows: Iterable[TorchRequirement | TorchaoRelease | FlashAttnRelease], version: Version) -> int:
    return next((i for i, r in enumerate(rows) if Version(r.version) == version), -1)


# ---- the plan and a wheel's build ----------------------------------------------------------------


def _accel(variant: str | None) -> tuple[str, tuple[int, ...]]:
    """``cu128`` -> ("cuda", (12, 8)); ``rocm6.2.4`` -> ("rocm", (6, 2, 4)); ``cpu`` -> ("cpu", ())."""
    if variant is None:
        return "", ()
    if m := re.fullmatch(r"cu(\d+)", variant):
        return "cuda", _cuda_digits(m.group(1))
    if m := re.fullmatch(r"rocm(\d+(?:\.\d+)*)", variant):
        return "rocm", tuple(int(p) for p in m.group(1).split("."))
    return variant, ()


def _cuda_digits(digits: str) -> tuple[int, ...]:
    """``12`` -> (12,) (a major, as flash-attn names it); ``124`` -> (12, 4); ``118`` -> (11, 8)."""
    if len(digits) <= 2:
        return (int(digits),)
    return int(digits[:-1]), int(digits[-1])


@dataclass(frozen=True)
class _Plan:
    label: str  # "torch 2.9.1+cu128"
    torch: Version
    series: str  # "2.9"
    variant: str | None
    backend: str  # "cuda" | "rocm" | "cpu" (from the variant)
    accel: tuple[int, ...]
    abi: bool | None
    python: str


@dataclass(frozen=True)
class _Build:
    label: str  # the local version as the file name writes it
    style: Literal["flash", "pyg", "variant"]
    series: str | None
    backend: str
    accel: tuple[int, ...]
    abi: bool | None


# ``cu12torch2.7cxx11abiTRUE`` (flash-attn), ``cu128torch2.9.0cxx11abiFALSE`` (third-party flash-attn
# builds name the full torch version), ``cu128.torch2.9.0`` (exllamav3: a dot between the parts).
# Only flash-attn's own naming (torch major.minor) derives the cxx11abi label from the build
# (publish.yml sets FLASH_ATTENTION_FORCE_CXX11_ABI to the label).  The full-version style comes from
# kingbri1/flash-attention's build-wheels.yml (at 0949014d and 15eea1b2), which renames the built wheel
# with a constant "cxx11abiFALSE" whatever ABI the build used: that label says nothing, so it is ignored.
_FLASH = re.compile(
    r"(?:cu(?P<cu>\d+)|rocm(?P<rocm>\d+))[._]?torch(?P<series>\d+\.\d+)(?P<patch>\.\d+)?"
    r"(?:cxx11abi(?P<abi>true|false))?"
)
_PYG = re.compile(r"pt(?P<major>\d)(?P<minor>\d+)(?P<accel>cu\d+|cpu)")
_VARIANT = re.compile(r"cu\d+|rocm\d+(?:\.\d+)*|cpu")


def _parse_build(label: str) -> _Build | None:
    """The build a local version names (``cu12torch2.7cxx11abiTRUE``, ``pt25cu124``, ``cu128``)."""
    text = label.lower()
    if m := _FLASH.fullmatch(text):
        labelled = m.group("abi") is not None and m.group("patch") is None
        abi = m.group("abi") == "true" if labelled else None
        if m.group("cu"):
            return _Build(label, "flash", m.group("series"), "cuda", _cuda_digits(m.group("cu")), abi)
        rocm = m.group("rocm")
        return _Build(label, "flash", m.group("series"), "rocm", (int(rocm[0]), int(rocm[1:] or 0)), abi)
    if m := _PYG.fullmatch(text):
        backend, accel = _accel(m.group("accel"))
        return _Build(label, "pyg", f"{m.group('major')}.{m.group('minor')}", backend, accel, None)
    if _VARIANT.fullmatch(text):
        backend, accel = _accel(text)
        return _Build(label, "variant", None, backend, accel, None)
    return None


def _plan_abi(data: AbiData, torch: Version, variant: str | None) -> bool | None:
    for rule in data.cxx11_abi:
        if SpecifierSet(rule.torch).contains(torch) and (not rule.variants or variant in rule.variants):
            return rule.abi
    return None


def _accel_text(backend: str, accel: tuple[int, ...]) -> str:
    if backend == "cpu":
        return "CPU only"
    name = {"cuda": "CUDA", "rocm": "ROCm"}.get(backend, backend)
    return f"{name} {'.'.join(str(n) for n in accel)}".strip()


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _abi_text(abi: bool) -> str:
    return "the C++11 ABI" if abi else "the pre-C++11 ABI"


def _flag(abi: bool) -> str:
    return "TRUE" if abi else "FALSE"
