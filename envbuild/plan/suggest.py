"""What would work instead, and the wording of it: variants per patch, releases carrying a card's kernels."""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from envbuild.catalog import CardEntry, CudaWheel, Release
from envbuild.plan.context import Context
from envbuild.versions import cubin_covers, version_choices


def cuda_name(variant: str) -> str:
    digits = variant.removeprefix("cu")
    return f"CUDA {digits[:-1]}.{digits[-1]}"


def cuda_wheels_for(release: Release, patch: str) -> list[CudaWheel]:
    return [w for w in release.cuda if not w.only_patches or patch in w.only_patches]


def newest_ga(ctx: Context) -> str:
    ga = [r for r in ctx.catalog.releases if r.status == "ga"]
    return max(ga, key=lambda r: Version(r.series)).patch[-1].version


def unknown_torch(ctx: Context, spec: str, version: str) -> str:
    """Why ``torch.version`` names nothing in the catalog, and what to write instead."""
    typed = ctx.profile.torch.version == spec or ctx.torch_line is not None
    head = ctx.torch_setting() if typed else f"torch {spec}"
    try:
        parsed: Version | None = Version(version)
    except InvalidVersion:
        parsed = None
    series = ctx.catalog.find_series(version)
    if parsed is not None and (parsed.is_prerelease or parsed.is_devrelease):
        final = parsed.base_version
        known = ctx.catalog.find_torch(final)
        alt = f"use the published release {known[1].version}" if known else f"use {newest_ga(ctx)}"
        return (
            f"{head} is a pre-release/nightly build: those live on download.pytorch.org/whl/test or "
            f"/whl/nightly and are not planned by envbuild; {alt}"
        )
    if series is not None:
        patches = ", ".join(p.version for p in series.patch)
        return (
            f"{head} is not a published {series.series} release; torch {series.series} has "
            f"{patches}: write one of them, or {series.series!r} for the newest patch"
        )
    listing = ", ".join(r.series for r in ctx.catalog.releases)
    return (
        f"{head} is not a release envbuild knows (series {listing}); "
        f"choose a published release such as {newest_ga(ctx)}"
    )


def releases_with(ctx: Context, variant: str) -> str:
    """The torch patches that publish ``variant`` (CUDA or ROCm), as runs: ``2.8.0 to 2.11.0, 2.12.1``."""
    runs: list[list[str]] = []
    previous = False
    for rel in ctx.catalog.releases:
        for patch in rel.patch:
            cuda = any(w.variant == variant for w in cuda_wheels_for(rel, patch.version))
            has = cuda or any(w.variant == variant for w in rel.rocm)
            if has and previous:
                runs[-1].append(patch.version)
            elif has:
                runs.append([patch.version])
            previous = has
    return ", ".join(r[0] if len(r) == 1 else f"{r[0]} to {r[-1]}" for r in runs)


def no_cuda_wheel(ctx: Context, wanted: str, variant: str, available: list[CudaWheel]) -> str:
    assert ctx.patch is not None and ctx.release is not None
    patch = ctx.patch.version
    valid = version_choices(cuda_name(w.variant)[5:] for w in available)
    listing = ", ".join(f"{w.variant} ({cuda_name(w.variant)})" for w in available)
    if ctx.catalog.cuda_toolkit(variant) is None:
        hint = (
            ' (it looks like a ROCm version: set accelerator.backend = "rocm")'
            if int(wanted.split(".")[0]) < 11
            else ""
        )
        known = version_choices(t.version for t in ctx.catalog.toolkits.cuda)
        return (
            f"{ctx.setting('accelerator.version')} is not a CUDA version PyTorch publishes wheels for "
            f"(CUDA {known}){hint}; torch {patch} publishes {listing}. Set accelerator.version to one "
            f"of {valid}."
        )
    other = next((w for w in ctx.release.cuda if w.variant == variant), None)
    why = f" (only in {', '.join(other.only_patches)})" if other else ""
    elsewhere = releases_with(ctx, variant)
    where = f"; {variant} wheels exist for torch {elsewhere}" if elsewhere else ""
    return (
        f"torch {patch} publishes no {variant} wheels ({ctx.setting('accelerator.version')}){why}; its "
        f"Linux CUDA wheels are {listing}{where}. "
        f"Set accelerator.version to one of {valid}, or change torch.version."
    )


def _cuda_version(variant: str) -> str:
    digits = variant.removeprefix("cu")
    return f"{digits[:-1]}.{digits[-1]}"


def _default_first(variants: list[str], default: str) -> list[str]:
    return sorted(variants, key=lambda v: (v != default, v))


def suggest_cuda(ctx: Context, card: CardEntry) -> str:
    """What carries kernels for ``card``: another variant of this release, else a newer release."""
    assert card.cc is not None
    cc = card.cc
    if ctx.release is not None and ctx.patch is not None:
        here = [
            w.variant for w in cuda_wheels_for(ctx.release, ctx.patch.version) if cubin_covers(w.cubins, cc)
        ]
        if here:
            versions = " or ".join(f'"{_cuda_version(v)}"' for v in here)
            return (
                f"Set accelerator.version = {versions}: torch {ctx.patch.version} "
                f"{'/'.join(here)} carries {card.arch}"
            )
    found = [
        (
            patch.version,
            _default_first(
                [w.variant for w in cuda_wheels_for(rel, patch.version) if cubin_covers(w.cubins, cc)],
                rel.pypi_default_cuda,
            ),
            rel.status == "ga",
        )
        for rel in ctx.catalog.releases
        for patch in rel.patch
    ]
    found = [f for f in found if f[1]]
    if not found:
        return f"No torch release in the catalog carries {card.arch} kernels"
    first = found[0]
    newest = ([f for f in found if f[2]] or found)[-1]
    return (
        f"torch {first[0]} ({'/'.join(first[1])}) is the first release with {card.arch} kernels; e.g. "
        f'torch.version = "{newest[0]}" with accelerator.version = "{_cuda_version(newest[1][0])}"'
    )


def suggest_rocm(ctx: Context, card: CardEntry) -> str:
    if ctx.release is not None and ctx.patch is not None:
        here = [w.variant for w in ctx.release.rocm if card.arch in w.targets]
        if here:
            versions = " or ".join(f'"{v.removeprefix("rocm")}"' for v in here)
            return (
                f"Set accelerator.version = {versions}: torch {ctx.patch.version} "
                f"{'/'.join(here)} carries {card.arch}"
            )
    found = [
        (patch.version, [w.variant for w in rel.rocm if card.arch in w.targets])
        for rel in ctx.catalog.releases
        for patch in rel.patch
    ]
    found = [(v, ws) for v, ws in found if ws]
    if not found:
        return f"No torch release in the catalog carries {card.arch}"
    first = found[0]
    return (
        f"torch {first[0]} ({'/'.join(first[1])}) is the first release with {card.arch} kernels: set "
        f'torch.version = "{first[0]}" or newer'
    )


def newer_toolkit(ctx: Context, minimum: str, *, cuda: bool) -> str:
    """``Set accelerator.version = "12.8"`` when this torch release has a variant new enough."""
    if ctx.release is not None and ctx.patch is not None:
        if cuda:
            names = [cuda_name(w.variant)[5:] for w in cuda_wheels_for(ctx.release, ctx.patch.version)]
        else:
            names = [w.variant.removeprefix("rocm") for w in ctx.release.rocm]
        ok = [n for n in names if Version(n) >= Version(minimum)]
        if ok:
            return f"Set accelerator.version to {version_choices(ok)}"
        return f"torch {ctx.patch.version} has no such variant: choose a newer torch.version"
    kind = "CUDA" if cuda else "ROCm"
    return f"Set accelerator.version to a {kind} version >= {minimum}"


def covers_all(ctx: Context, wheel: CudaWheel) -> bool:
    return all(c.cc is not None and cubin_covers(wheel.cubins, c.cc) for c in ctx.gpu_cards)


def cuda_variant(wanted: str) -> str:
    """``12.8`` / ``12.8.1`` -> ``cu128``."""
    parts = wanted.split(".")
    return "cu" + "".join(parts[:2]) if len(parts) >= 2 else "cu" + wanted
