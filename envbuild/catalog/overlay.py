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

:func:`merge` turns torch releases the built-in catalog lacks into rows the planner can use, all
``unconfirmed``: the arch lists of their variants are not in the overlay (an index does not say which
cubins a wheel carries), so they are assumed from the newest built-in release with the same variant,
and every plan using such a row gets a warning naming what is unconfirmed.  Built-in rows are never
replaced; where the overlay disagrees with one, :class:`OverlayState` says so.

Reading the overlay is one small JSON file; nothing here touches the network.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from envbuild.boundary import INPUT, InvalidData, error_message, parse, to_data
from envbuild.catalog import cache
from envbuild.catalog.rows import text
from envbuild.catalog.toolkit_rows import Toolkits
from envbuild.catalog.torch_rows import CudaWheel, PatchEntry, Release, RocmWheel, TorchCatalog

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
        delta = (now or datetime.now(UTC)) - self.overlay.fetched_at
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
        raise OverlayInvalid("fetched_at: no time zone (expected UTC)")
    cache.store(path, Overlay, key, overlay)
    return overlay


def write(path: Path, overlay: Overlay) -> None:
    """Write ``overlay`` to ``path`` atomically (a temporary file renamed into place)."""
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(to_data(overlay), indent=1, sort_keys=True) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# ---- merging into the built-in torch catalog -------------------------------------------------------


def _final(version: str) -> Version | None:
    try:
        v = Version(version)
    except InvalidVersion:
        return None
    return None if v.is_prerelease or v.is_postrelease or v.is_devrelease or v.local else v


def _contains(requirement: str | None, version: str) -> bool:
    if requirement is None:
        return False
    try:
        return SpecifierSet(requirement).contains(version, prereleases=False)
    except InvalidSpecifier:
        return False


def _exact(requirement: str | None) -> str | None:
    """``==2.14.0`` -> 2.14.0; anything else (a range, ``~=``, none) -> None."""
    if not requirement:
        return None
    try:
        specs = list(SpecifierSet(requirement))
    except InvalidSpecifier:
        return None
    if len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version:
        return specs[0].version
    return None


def pair(overlay: Overlay, name: str, torch_version: str) -> tuple[CompanionRow | None, bool]:
    """The ``name`` release for ``torch_version``: one whose metadata pins it exactly (confirmed), else
    the newest whose torch requirement admits it (inferred); (None, False) when none does."""
    rows = [c for c in overlay.companions if c.name == name and not c.yanked and _final(c.version)]
    exact = [c for c in rows if c.confirmed and _exact(c.torch_requirement) == torch_version]
    if exact:
        return max(exact, key=lambda c: Version(c.version)), True
    ranged = [
        c
        for c in rows
        if c.confirmed and c.torch_requirement and _contains(c.torch_requirement, torch_version)
    ]
    if ranged:
        return max(ranged, key=lambda c: Version(c.version)), False
    return None, False


def resolve_triton(overlay: Overlay, row: TorchRow) -> str | None:
    """The triton release torch's requirement selects: the exact pin, else the newest triton on the
    index that satisfies it (``~=3.8.0`` -> 3.8.0 when that is the only 3.8.x)."""
    if row.triton_requirement is None:
        return None
    exact = _exact(row.triton_requirement)
    if exact:
        return exact
    found = [
        c.version
        for c in overlay.companions
        if c.name == "triton"
        and not c.yanked
        and _final(c.version)
        and _contains(row.triton_requirement, c.version)
    ]
    return max(found, key=Version) if found else None


def _series(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _pythons(tags: tuple[str, ...]) -> tuple[str, ...]:
    """``cp312``, ``cp314t`` -> ``3.12``, ``3.14`` (X.Y of every CPython tag), sorted."""
    found = set()
    for tag in tags:
        head = tag.split("-")[0]
        if head.startswith("cp") and head[2:].rstrip("t").isdigit() and len(head.rstrip("t")) >= 4:
            digits = head[2:].rstrip("t")
            found.add(f"{digits[0]}.{digits[1:]}")
    return tuple(sorted(found, key=lambda v: tuple(int(x) for x in v.split("."))))


def _assumed(
    torch: TorchCatalog, variant: str, below: Version
) -> tuple[Release, CudaWheel | RocmWheel] | None:
    """The newest built-in release below ``below`` (else any) publishing ``variant``, and its row."""
    rows: list[tuple[Release, CudaWheel | RocmWheel]] = []
    for rel in torch.release:
        wheels: list[CudaWheel | RocmWheel] = [*rel.cuda, *rel.rocm]
        rows.extend((rel, wheel) for wheel in wheels if wheel.variant == variant)
    if not rows:
        return None
    older = [r for r in rows if Version(r[0].series) < below] or rows
    return max(older, key=lambda r: Version(r[0].series))


def compare(torch: TorchCatalog, overlay: Overlay) -> tuple[str, ...]:
    """Where the overlay's metadata disagrees with a built-in row (built-in rows stay in force)."""
    out: list[str] = []
    for row in overlay.torch:
        for rel in torch.release:
            patch = next((p for p in rel.patch if p.version == row.version), None)
            if patch is None:
                continue
            if row.confirmed and row.default_variant and row.default_variant != rel.pypi_default_cuda:
                out.append(
                    f"torch {row.version}: the PyPI wheel's metadata names {row.default_variant} "
                    f"(CUDA {row.cuda_major}); the built-in catalog says the PyPI default is "
                    f"{rel.pypi_default_cuda}"
                )
            triton = resolve_triton(overlay, row) if row.confirmed else None
            if triton and triton != patch.triton:
                out.append(
                    f"torch {row.version}: its metadata requires triton{row.triton_requirement} "
                    f"({triton}); the built-in catalog pairs triton {patch.triton}"
                )
            for name, built_in in (("torchvision", patch.torchvision), ("torchaudio", patch.torchaudio)):
                comp, exact = pair(overlay, name, row.version)
                if comp is not None and exact and comp.version != built_in:
                    out.append(
                        f"torch {row.version}: {name} {comp.version}'s metadata pins torch=={row.version}; "
                        f"the built-in catalog pairs {name} {built_in or '(none)'}"
                    )
    return tuple(out)


def merge(
    torch: TorchCatalog, toolkits: Toolkits, overlay: Overlay, path: Path, *, with_compare: bool = False
) -> tuple[TorchCatalog, OverlayState]:
    """``torch`` with the overlay's releases that it lacks added as ``unconfirmed`` rows; with
    ``with_compare``, also where the overlay disagrees with built-in rows (for refresh and show; check
    does not need it)."""
    known = {p.version for r in torch.release for p in r.patch}
    oldest = min(Version(r.series) for r in torch.release)
    cuda_variants = {t.variant for t in toolkits.cuda}
    rocm_variants = {t.variant for t in toolkits.rocm}
    pytorch_read = overlay.index_ok("pytorch")
    usable: dict[str, Usable] = {}
    unusable: list[str] = []
    new_patches: dict[str, list[tuple[TorchRow, PatchEntry]]] = {}
    releases = {r.series: r for r in torch.release}

    for row in sorted(overlay.torch, key=lambda r: Version(r.version)):
        v = _final(row.version)
        if v is None or row.yanked or row.version in known or Version(_series(row.version)) < oldest:
            continue
        notes: list[str] = []
        triton = resolve_triton(overlay, row)
        if triton is None:
            unusable.append(f"torch {row.version}: no metadata served, so its triton pin is unknown")
            continue
        if not row.confirmed:
            notes.append("its metadata was not read")
        elif _exact(row.triton_requirement) is None:
            notes.append(f"triton {triton} chosen from the requirement triton{row.triton_requirement}")
        vision, vision_exact = pair(overlay, "torchvision", row.version)
        if vision is None:
            unusable.append(f"torch {row.version}: no torchvision release on the index names it")
            continue
        if not vision_exact:
            notes.append(
                f"torchvision {vision.version} is paired by its range torch{vision.torch_requirement}"
            )
        audio, audio_exact = pair(overlay, "torchaudio", row.version)
        if audio is not None and not audio_exact:
            notes.append(f"torchaudio {audio.version} is paired by its range torch{audio.torch_requirement}")
        sources = [
            row.source,
            row.metadata_source,
            vision.metadata_source,
            audio.metadata_source if audio else None,
        ]
        try:
            patch = PatchEntry(
                version=row.version,
                torchvision=vision.version,
                torchaudio=audio.version if audio else None,
                triton=triton,
                tier="unconfirmed",
                source="catalog overlay: " + "; ".join(s for s in sources if s),
            )
        except ValueError as exc:  # a row check (envbuild.catalog.*_rows) refused a value
            unusable.append(f"torch {row.version}: {exc}")
            continue
        new_patches.setdefault(_series(row.version), []).append((row, patch))
        usable[row.version] = Usable(row.version, tuple(notes), row.metadata_source or row.source)

    merged = dict(releases)
    for series, items in new_patches.items():
        base = releases.get(series)
        if base is not None:
            merged[series] = replace(base, patch=(*base.patch, *(p for _, p in items)))
            for row, _ in items:
                usable[row.version] = _with(
                    usable[row.version],
                    f"the {series} variants and their arch lists are the built-in {series} rows, "
                    f"not read for {row.version}",
                )
            continue
        newest = items[-1][0]
        default = newest.default_variant
        if default is None:
            previous = max(releases.values(), key=lambda r: Version(r.series))
            default = previous.pypi_default_cuda
            extra = f"its PyPI default build is not known (assumed {default}, as torch {previous.series})"
        else:
            extra = ""
        variants = [default]
        if pytorch_read and newest.variants is not None:
            variants = sorted(set(newest.variants) | {default})
        cuda: list[CudaWheel] = []
        rocm: list[RocmWheel] = []
        arch_notes: list[tuple[str, str]] = []
        release_notes: list[str] = []
        for variant in variants:
            if variant not in cuda_variants and variant not in rocm_variants:
                continue
            assumed = _assumed(torch, variant, Version(series))
            if assumed is None:
                continue
            rel, wheel = assumed
            read_from = next(
                (u for u in (newest.variants_source or "").split("; ") if f"/{variant}/" in u),
                newest.metadata_source or newest.source,
            )
            src = (
                f"catalog overlay: {variant} of torch {series} read from {read_from}; "
                f"arch list assumed from the built-in torch {rel.series} {variant} row"
            )
            if isinstance(wheel, CudaWheel):
                cuda.append(
                    CudaWheel(variant=variant, arch_list=wheel.arch_list, tier="unconfirmed", source=src)
                )
                arch_notes.append(
                    (variant, f"the {variant} arch list is unknown (assumed from torch {rel.series})")
                )
            else:
                rocm.append(RocmWheel(variant=variant, gfx=wheel.gfx, tier="unconfirmed", source=src))
                arch_notes.append(
                    (variant, f"the {variant} gfx list is unknown (assumed from torch {rel.series})")
                )
        if default not in {w.variant for w in cuda}:
            for row, _ in items:
                del usable[row.version]
                unusable.append(
                    f"torch {row.version}: its default build {default} has no toolkit row or known arch list"
                )
            continue
        pythons = _pythons(tuple(t for row, _ in items for t in row.python))
        try:
            release = Release(
                series=series,
                status="unconfirmed",
                python=pythons,
                pypi_default_cuda=default,
                min_glibc=newest.glibc or "2.28",
                patch=tuple(p for _, p in items),
                cuda=tuple(cuda),
                rocm=tuple(rocm),
                tier="unconfirmed",
                source="catalog overlay: " + (newest.metadata_source or newest.source),
            )
        except ValueError as exc:
            for row, _ in items:
                del usable[row.version]
                unusable.append(f"torch {row.version}: {exc}")
            continue
        merged[series] = release
        if not pytorch_read:
            release_notes.append(
                f"only the PyPI default build ({default}) is known: the PyTorch index was not read"
            )
        if extra:
            release_notes.append(extra)
        for row, _ in items:
            item = _with(usable[row.version], *release_notes)
            usable[row.version] = Usable(item.version, item.unconfirmed, item.source, tuple(arch_notes))

    ordered = tuple(sorted(merged.values(), key=lambda r: Version(r.series)))
    state = OverlayState(
        path=path,
        overlay=overlay,
        usable=usable,
        unusable=tuple(unusable),
        disagreements=compare(torch, overlay) if with_compare else (),
    )
    return replace(torch, release=ordered), state


def _with(item: Usable, *notes: str) -> Usable:
    return Usable(item.version, (*notes, *item.unconfirmed), item.source)


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
    fetched = state.overlay.fetched_at.astimezone(UTC)
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
