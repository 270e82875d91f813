"""The user's catalog overlay: what ``envbuild catalog refresh`` read from the package indexes.

The overlay is one JSON file, ``catalog-overlay.json`` in envbuild's data folder
(:func:`envbuild.resources.data_dir`).  It records facts, each with the exact URL it was read from
and whether it was read from real metadata (``confirmed``) or inferred:

- torch releases: the Python tags of the Linux x86_64 wheels, the CUDA major and build (``cuNNN``)
  of the PyPI default wheel (from its ``nvidia-*-cuNN`` / ``cuda-toolkit`` Requires-Dist), its
  ``triton`` requirement, the variants on the PyTorch index (None when that index was not read);
- companion releases (torchvision, torchaudio, triton): their ``torch`` requirement (None when the
  metadata names none, as torchaudio 2.11.0's does; "" when it names torch without a version);
- bpy releases.

:func:`envbuild.catalog.overlay_merge.merge` turns torch releases the built-in catalog lacks into rows
the planner can use, all ``unconfirmed``: the arch lists of their variants are not in the overlay (an
index does not say which cubins a wheel carries), so they are assumed from the newest built-in release
with the same variant, and every plan using such a row gets a warning naming what is unconfirmed
(:func:`findings`).  Built-in rows are never replaced; where the overlay disagrees with one,
:class:`OverlayState` says so (:func:`envbuild.catalog.overlay_pairs.compare`).  This module holds the
file (its rows, :func:`read`, :func:`write`) and the findings for ``check``.

Reading the overlay is one small JSON file; nothing here touches the network.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from envbuild.boundary import INPUT, InvalidData, error_message, parse, to_data
from envbuild.catalog import cache
from envbuild.catalog.rows import text

FORMAT = 1
FILENAME = "catalog-overlay.json"
STALE_DAYS = 30


def overlay_path() -> Path:
    from envbuild.resources import data_dir

    return data_dir() / FILENAME


@dataclass(frozen=True, kw_only=True)
class IndexRead:
    """One index refresh read: its URL, and whether it answered (else the error)."""

    kind: Literal["pypi", "pytorch"]
    url: str
    ok: bool
    error: str | None = None


@dataclass(frozen=True, kw_only=True)
class _Row:
    version: str
    source: str  # the exact URL the row was read from
    confirmed: bool  # read from real metadata (True) or inferred / not served (False)
    yanked: bool = False
    python: tuple[str, ...] = ()  # wheel Python tags of the Linux x86_64 files: cp312, cp314t, cp39-abi3
    requires_python: str | None = None

    def __post_init__(self) -> None:
        text("source", self.source)


@dataclass(frozen=True, kw_only=True)
class TorchRow(_Row):
    glibc: str | None = None  # from the manylinux tag of the Linux x86_64 wheels: "2.28"
    metadata_source: str | None = None  # the .metadata URL read (None: none served)
    cuda_major: int | None = None  # of the PyPI default wheel
    default_variant: str | None = None  # cuNNN, from its CUDA runtime / cuda-toolkit pin
    triton_requirement: str | None = None  # "==3.6.0", "~=3.8.0"
    variants: tuple[str, ...] | None = None  # on the PyTorch index; None when it was not read
    variants_source: str | None = None


@dataclass(frozen=True, kw_only=True)
class CompanionRow(_Row):
    name: Literal["torchvision", "torchaudio", "triton"]
    metadata_source: str | None = None
    torch_requirement: str | None = None  # specifier; "" = any torch; None = no torch requirement


@dataclass(frozen=True, kw_only=True)
class BpyRow(_Row):
    pass


@dataclass(frozen=True, kw_only=True)
class Overlay:
    __pydantic_config__ = INPUT  # read from outside: see envbuild.boundary

    format: Literal[1]
    fetched_at: datetime
    envbuild_version: str
    indexes: tuple[IndexRead, ...]
    torch: tuple[TorchRow, ...] = ()
    companions: tuple[CompanionRow, ...] = ()
    bpy: tuple[BpyRow, ...] = ()

    def index_ok(self, kind: str) -> bool:
        return any(i.kind == kind and i.ok for i in self.indexes)


@dataclass(frozen=True)
class Usable:
    """A torch release the overlay made usable: what about it is unconfirmed, and where it was read."""

    version: str
    unconfirmed: tuple[str, ...]
    source: str
    variants: tuple[tuple[str, str], ...] = ()  # (variant, what is unconfirmed about its row)

    def notes(self, variant: str | None) -> list[str]:
        """What is unconfirmed for a plan on ``variant``: the release's notes and that variant's row."""
        return [*self.unconfirmed, *(note for v, note in self.variants if v == variant)]


@dataclass(frozen=True, eq=False)
class OverlayState:
    """The overlay in force (or why none is): for findings and ``envbuild catalog show``."""

    path: Path
    overlay: Overlay | None = None
    error: str | None = None  # the file exists but could not be used
    usable: dict[str, Usable] = field(default_factory=dict)
    unusable: tuple[str, ...] = ()  # "torch 2.16.0: no torchvision release names it"
    disagreements: tuple[str, ...] = ()

    def age_days(self, now: datetime | None = None) -> int | None:
        if self.overlay is None:
            return None
        delta = (now or datetime.now(timezone.utc)) - self.overlay.fetched_at
        return max(0, delta.days)


# ---- reading / writing ------------------------------------------------------------------------------


class OverlayInvalid(Exception):
    """The overlay file exists but is not a readable overlay (the message names what is wrong)."""


def read(path: Path) -> Overlay:
    """The overlay at ``path``: validated once, then read back from the catalog cache while its bytes
    are the same (:mod:`envbuild.catalog.cache`)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise OverlayInvalid(f"cannot read it: {exc.strerror or exc}") from None
    key = cache.cache_key(raw, Overlay)
    cached = cache.load(path, Overlay, key)
    if cached is not None:
        return cached
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise OverlayInvalid(f"not valid JSON: {exc}") from None
    if isinstance(data, dict) and data.get("format") != FORMAT:
        raise OverlayInvalid(f"format {data.get('format')!r} is not {FORMAT} (written by another envbuild)")
    try:
        overlay = parse(Overlay, data)
    except InvalidData as exc:
        err = exc.errors[0]
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise OverlayInvalid(f"{where}: {error_message(err)}") from None
    if overlay.fetched_at.tzinfo is None:
        raise OverlayInvalid("fetched_at: no time zone (expected timezone.utc)")
    _check_strings(to_data(overlay), "")
    cache.store(path, Overlay, key, overlay)
    return overlay


def _check_strings(data: object, where: str) -> None:
    """Every string of the overlay passes the profile's free-text check (one line, visible characters):
    its sources and versions reach plans, and from there the comments of ``requirements-rebuild.txt``,
    where a line break by Python's rules (U+2028, NEL, ...) would start a line pip reads as an option.
    An index's ``error`` is exempt: it is a message for ``catalog show``, never part of a plan."""
    from envbuild.profile.fields import check_text

    if isinstance(data, str):
        problem = check_text(data, max_len=1 << 20)
        if problem is not None:
            raise OverlayInvalid(f"{where or '(top level)'}: {problem}")
    elif isinstance(data, dict):
        for key, value in data.items():
            if not (key == "error" and where.startswith("indexes.")):
                _check_strings(value, f"{where}.{key}" if where else str(key))
    elif isinstance(data, list | tuple):
        for i, value in enumerate(data):
            _check_strings(value, f"{where}.{i}")


def write(path: Path, overlay: Overlay) -> None:
    """Write ``overlay`` to ``path`` atomically (a temporary file renamed into place)."""
    from envbuild import atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(to_data(overlay), indent=1, sort_keys=True) + "\n"
    atomic.write_text(path, text, mode=0o600)  # the mode tempfile.mkstemp gave it


# ---- findings for check() ----------------------------------------------------------------------------

Finding = tuple[Literal["error", "warning", "info"], str, str, str | None]


def findings(
    state: OverlayState,
    torch_version: str | None,
    variant: str | None,
    archs: tuple[str, ...],
    now: datetime | None = None,
) -> list[Finding]:
    """The overlay's age (info, or a warning past :data:`STALE_DAYS`), and a warning for a plan whose
    torch release comes from the overlay, naming what is unconfirmed."""
    if state.overlay is None:
        return [
            (
                "warning",
                "W-OVERLAY-INVALID",
                f"the catalog overlay {state.path} is ignored ({state.error}); run `envbuild catalog "
                "refresh` to write it again, or delete it",
                None,
            )
        ]
    out: list[Finding] = []
    fetched = state.overlay.fetched_at.astimezone(timezone.utc)
    age = state.age_days(now) or 0
    days = f"{age} day{'s' if age != 1 else ''}"
    when = f"the catalog overlay {state.path} (refreshed {fetched:%Y-%m-%d %H:%M} UTC, {days} old)"
    if age > STALE_DAYS:
        out.append(
            (
                "warning",
                "W-OVERLAY-STALE",
                f"{when} is older than {STALE_DAYS} days; run `envbuild catalog refresh` to read the "
                "indexes again",
                None,
            )
        )
    else:
        out.append(("info", "I-OVERLAY", f"{when} is in force beside the built-in catalog", None))
    usable = state.usable.get(torch_version or "")
    if usable is not None:
        prefix = (
            "sm_"
            if (variant or "").startswith("cu")
            else "gfx"
            if (variant or "").startswith("rocm")
            else None
        )
        gpu = [a for a in archs if prefix and a.startswith(prefix)]
        notes = usable.notes(variant)
        if gpu and any(v == variant for v, _ in usable.variants):
            notes.append(f"so kernels for {', '.join(gpu)} cannot be confirmed")
        out.append(
            (
                "warning",
                "W-OVERLAY-UNCONFIRMED",
                f"torch {usable.version} is known only from the catalog overlay, not the built-in catalog: "
                + "; ".join(notes)
                + "; verify the wheels before ordering, or choose a built-in release "
                "(`envbuild catalog show`)",
                usable.source,
            )
        )
    return out
