"""What would work instead: the torch release / variant that carries kernels for a card."""

from __future__ import annotations

from envbuild.catalog import CardEntry
from envbuild.plan.context import Context
from envbuild.plan.resolve import cuda_wheels_for
from envbuild.plan.versions import cubin_covers


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
        f"torch {first[0]} ({'/'.join(first[1])}) is the first release with {card.arch} kernels; "
        "use it or newer"
    )
