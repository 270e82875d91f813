"""Merging the overlay into the built-in torch catalog: the releases it lacks become ``unconfirmed`` rows
(:func:`merge`), their arch lists assumed from the newest built-in release with the same variant."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from packaging.version import Version

from envbuild.catalog.overlay import Overlay, OverlayState, TorchRow, Usable
from envbuild.catalog.overlay_pairs import compare, exact_pin, final_release, pair, resolve_triton
from envbuild.catalog.toolkit_rows import Toolkits
from envbuild.catalog.torch_rows import CudaWheel, PatchEntry, Release, RocmWheel, TorchCatalog


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
        v = final_release(row.version)
        if v is None or row.yanked or row.version in known or Version(_series(row.version)) < oldest:
            continue
        notes: list[str] = []
        triton = resolve_triton(overlay, row)
        if triton is None:
            unusable.append(f"torch {row.version}: no metadata served, so its triton pin is unknown")
            continue
        if not row.confirmed:
            notes.append("its metadata was not read")
        elif exact_pin(row.triton_requirement) is None:
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
