"""The CUDA toolkit or ROCm version of a plan without torch (Blender, plain Ubuntu with a GPU): the one
its base image and driver floor follow."""

from __future__ import annotations

from packaging.version import Version

from envbuild.catalog import CudaToolkit
from envbuild.findings import Findings
from envbuild.plan.context import Context, cite
from envbuild.plan.environment import choose_os
from envbuild.plan.resolve import rocm_matches
from envbuild.versions import version_choices


def resolve_toolkit_without_torch(ctx: Context, out: Findings) -> None:
    """No torch: pick the toolkit/ROCm version for the base image (Blender, plain Ubuntu with a GPU)."""
    _toolkit_without_torch(ctx, out)
    choose_os(ctx, out)


def _oldest_toolkit(ctx: Context, tks: list[CudaToolkit]) -> tuple[CudaToolkit, str]:
    """No torch, no accelerator.version: the oldest CUDA toolkit that supports the targets (the lowest
    driver floor), one with an nvidia/cuda image for the OS first, and why, for I-VARIANT-DERIVED.

    Without an image for the OS (debian12), or for Blender, the base is the plain OS image with
    NVIDIA_REQUIRE_CUDA set by the Dockerfile (``environment.base_image``), so no toolkit is refused
    for lack of an image."""
    need = max((Version(c.min_cuda) for c in ctx.gpu_cards if c.min_cuda), default=Version("0"))
    fits = [t for t in tks if Version(t.version) >= need]
    with_image = [t for t in fits if ctx.os.id in t.image_os]
    if with_image:
        return with_image[0], (
            f"the oldest toolkit that supports the targets and has an nvidia/cuda image for {ctx.os.id} "
            "(lowest driver floor)"
        )
    if fits:
        return fits[0], (
            f"the oldest toolkit that supports the targets (lowest driver floor); nvidia/cuda has no "
            f"image of it for {ctx.os.id}"
        )
    newest = max(tks, key=lambda t: Version(t.version))
    return newest, f"the newest toolkit in the catalog; none supports CUDA {need} that the targets need"


def _toolkit_without_torch(ctx: Context, out: Findings) -> None:
    wanted = ctx.profile.accelerator.version
    if ctx.backend == "cpu" and wanted:
        out.warning(
            "W-VERSION-IGNORED",
            f"{ctx.setting('accelerator.version')} is ignored for {ctx.setting('accelerator.backend')}; "
            "remove it, or set accelerator.backend to cuda or rocm",
        )
    if ctx.backend == "cuda":
        tks = list(ctx.catalog.toolkits.cuda)
        if wanted:
            tk = next((t for t in tks if t.version == ".".join(wanted.split(".")[:2])), None)
            if tk is None:
                out.error(
                    "E-VARIANT-UNAVAILABLE",
                    f"{ctx.setting('accelerator.version')}: no CUDA toolkit image in the catalog; "
                    f"set accelerator.version to one of {version_choices(t.version for t in tks)}",
                )
                return
        else:
            tk, why = _oldest_toolkit(ctx, tks)
            out.info(
                "I-VARIANT-DERIVED",
                f"accelerator.version not set: using CUDA {tk.image_version}, {why}",
                source=cite((f"CUDA {tk.version}", tk)),
            )
        ctx.toolkit, ctx.variant = tk, None
    elif ctx.backend == "rocm":
        rocms = list(ctx.catalog.toolkits.rocm)
        if wanted:
            rv = next((r for r in rocms if rocm_matches(r.variant, wanted)), None)
            if rv is None:
                out.error(
                    "E-VARIANT-UNAVAILABLE",
                    f"{ctx.setting('accelerator.version')}: no ROCm image in the catalog; "
                    f"set accelerator.version to one of {version_choices(r.version for r in rocms)}",
                )
                return
        else:
            rfits = [r for r in rocms if ctx.os.id in r.image_os]
            rv = (rfits or rocms)[-1]
        ctx.rocm = rv
