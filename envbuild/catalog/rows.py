"""The base of every catalog row, and the checks a type cannot state.

Every row of the catalog (the TOML files in ``envbuild/data/``) carries ``tier`` (P primary, S
secondary, unconfirmed) and ``source`` (the citation copied from the design's compat-facts).  The rows
are frozen dataclasses (one module per data file: :mod:`envbuild.catalog.card_rows`,
:mod:`~envbuild.catalog.torch_rows`, :mod:`~envbuild.catalog.toolkit_rows`,
:mod:`~envbuild.catalog.platform_rows`, :mod:`~envbuild.catalog.blender_rows`): a file is validated
once, on a cache miss, by :func:`envbuild.boundary.parse` (types, literals, unknown keys) and each row's
``__post_init__`` (shapes and ranges, with the checks below), so the planner can rely on shapes
(``sm_90``, ``gfx942``, ``570.124.06``, ``cu128``, ``rocm6.2.4``).  A ``ValueError`` here names the key
it is about.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sized
from dataclasses import dataclass
from typing import Literal, NoReturn

Tier = Literal["P", "S", "unconfirmed"]

SERIES = re.compile(r"^\d+\.\d+$")
VERSION = re.compile(r"^\d+\.\d+(\.\d+)?$")
DRIVER = re.compile(r"^\d{3}(\.\d{1,3}){0,2}$")
CUDA_VARIANT = re.compile(r"^cu\d{3}$")
ROCM_VARIANT = re.compile(r"^rocm\d+\.\d+(\.\d+)?$")
SM = re.compile(r"^sm_(\d+)(\d)$")
GFX = re.compile(r"^gfx[0-9a-f]{3,4}$")


# ---- the checks a type cannot state; each raises ValueError("key: problem") ------------------------


def fail(key: str, problem: str) -> NoReturn:
    raise ValueError(f"{key}: {problem}")


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
    m = SM.match(arch)
    if not m:
        raise ValueError(f"{arch!r} is not an sm_XY arch")
    return int(m.group(1)), int(m.group(2))
