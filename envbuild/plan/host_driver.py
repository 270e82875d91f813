"""Rules about the host driver to order: NVIDIA's driver floor (toolkit, cards, Blender OptiX) against
``--driver``, ROCm's host advice for AMD targets, and a provisional floor before resolution."""

from __future__ import annotations

from collections.abc import Iterable

from envbuild.findings import Findings
from envbuild.models import Finding
from envbuild.plan.blender import optix_driver
from envbuild.plan.context import Context, cite
from envbuild.versions import cubin_covers, driver_at_least, max_driver, ptx_covers


def _nvidia_ordered(ctx: Context) -> bool:
    """NVIDIA driver advice applies: backend cuda, and an NVIDIA target (or no target named at all).

    A plan whose only targets are AMD (or CPU) cards gets no NVIDIA driver text, even when its backend
    is wrongly cuda (E-VENDOR-MISMATCH says so).
    """
    return ctx.backend == "cuda" and (not ctx.gpu_cards or any(c.vendor == "nvidia" for c in ctx.gpu_cards))


def min_driver(ctx: Context) -> str | None:
    """The driver to order: the toolkit's, the cards' (Blackwell R570+), Blender OptiX's."""
    if not _nvidia_ordered(ctx) or ctx.toolkit is None:
        return None
    cards = (c.min_driver for c in ctx.gpu_cards if c.vendor == "nvidia")
    return max_driver(ctx.toolkit.driver, *cards, optix_driver(ctx))


def check_driver(ctx: Context, out: Findings) -> None:
    """The host driver to order: ROCm's advice for AMD targets, NVIDIA's only where an NVIDIA card is."""
    tk = ctx.toolkit
    check_rocm_host(ctx, out)
    if ctx.driver is not None and not _nvidia_ordered(ctx):
        reason = (
            f"backend is {ctx.backend}"
            if ctx.backend != "cuda"
            else f"no target is an NVIDIA card ({', '.join(c.id for c in ctx.gpu_cards)})"
        )
        out.info("I-DRIVER-IGNORED", f"--driver {ctx.driver} applies to NVIDIA cards; {reason}")
        return
    if not _nvidia_ordered(ctx) or tk is None:
        return
    family = ctx.catalog.cuda_family(tk.major)
    floor = family.driver if family else tk.driver
    need = min_driver(ctx) or tk.driver
    src = cite((f"CUDA {tk.image_version}", tk), (f"CUDA {tk.major}.x floor", family))
    if ctx.driver is None:
        why = [f"CUDA {tk.image_version}"]
        if need != tk.driver:  # a card (Blackwell R570+) or Blender OptiX asks for more than the toolkit
            why += [f"{c.id} needs {c.min_driver}" for c in ctx.gpu_cards if c.min_driver == need]
            optix = optix_driver(ctx)
            if optix == need:
                why.append(f"Blender OptiX needs {optix}")
        cards = [(c.id, c) for c in ctx.gpu_cards if c.min_driver == need]
        if _provisional(ctx):
            why.append("provisional: torch is not pinned, see W-DRIVER-PROVISIONAL")
        out.info(
            "I-DRIVER-UNKNOWN",
            f"no --driver given: order a machine with NVIDIA driver >= {need} ({'; '.join(why)}); "
            f"{floor} is the CUDA {tk.major}.x floor under minor-version compatibility (limited features)",
            source=cite(src, *cards),
        )
        return
    drv = ctx.driver
    for card in ctx.gpu_cards:
        if card.min_driver and not driver_at_least(drv, card.min_driver):
            out.error(
                "E-DRIVER-CARD",
                f"{card.name} needs driver >= {card.min_driver}; driver {drv} cannot drive it: order a "
                f"machine with driver >= {card.min_driver}",
                source=cite((card.id, card)),
            )
    if not driver_at_least(drv, floor):
        out.error(
            "E-DRIVER-TOO-OLD",
            f"driver {drv} is older than {floor}, the minimum for any CUDA {tk.major}.x application "
            f"(minor-version compatibility); {ctx.torch_label} needs CUDA {tk.image_version}: order driver "
            f">= {need}, or set accelerator.version to an older CUDA version (a lower driver floor)",
            source=src,
        )
    elif not driver_at_least(drv, tk.driver):
        jit = [
            c.id
            for c in ctx.gpu_cards
            if ctx.cuda_wheel
            and c.cc
            and not cubin_covers(ctx.cuda_wheel.cubins, c.cc)
            and ptx_covers(ctx.cuda_wheel.ptx, c.cc)
        ]
        if jit:
            out.error(
                "E-DRIVER-PTX",
                f"{', '.join(jit)} run {ctx.torch_label} only through PTX JIT, which needs a driver at "
                "least as "
                f"new as CUDA {tk.image_version} (>= {tk.driver}); driver {drv} is older: order a machine "
                f"with driver >= {tk.driver}",
                source=cite(src, (f"{ctx.torch_label} arch list", ctx.cuda_wheel)),
            )
        else:
            out.warning(
                "W-DRIVER-MINOR-COMPAT",
                f"driver {drv} is below {tk.driver} (CUDA {tk.image_version}) but >= {floor}: it runs under "
                "minor-version compatibility with a limited feature set (no JIT of newer PTX); an "
                "nvidia/cuda base image also sets NVIDIA_REQUIRE_CUDA, so the container toolkit may refuse "
                f"to start it on this driver: prefer a machine with driver >= {tk.driver}",
                source=src,
            )


def check_rocm_host(ctx: Context, out: Findings) -> None:
    """ROCm's counterpart of the driver advice: what the host must run, minimums only where sourced."""
    amd = [c for c in ctx.gpu_cards if c.vendor == "amd"]
    if ctx.backend != "rocm" or not amd or ctx.rocm is None:
        return
    mins = [
        f"{c.name} needs ROCm >= {c.min_rocm}"
        + (" (unconfirmed)" if c.min_rocm_tier == "unconfirmed" else "")
        for c in amd
        if c.min_rocm
    ]
    cards = f" ({'; '.join(mins)})" if mins else ""
    out.info(
        "I-ROCM-HOST",
        f"order a machine whose amdgpu kernel driver supports ROCm {ctx.rocm.version}, the userspace in the "
        f"image{cards}; the container reaches the card through "
        "/dev/kfd and /dev/dri. envbuild knows no amdgpu driver version minimum: check AMD's ROCm "
        "compatibility matrix for the host's driver",
        source=cite((f"ROCm {ctx.rocm.version}", ctx.rocm), *((c.id, c) for c in amd if c.min_rocm)),
    )


PROVISIONAL_CODE = "W-DRIVER-PROVISIONAL"


def _provisional(ctx: Context) -> bool:
    """Before resolution, with no torch in the plan (no torch.version, no exact ``torch==X`` line, no
    default), and requirement lines that may bring one in: the floor is the toolkit's guess."""
    if ctx.served is not None or ctx.resolved is not None or ctx.patch is not None or ctx.uncataloged:
        return False
    return any(line.kind == "requirement" for line in ctx.profile.python.lines)


def provisional(findings: Iterable[Finding]) -> bool:
    """The plan's driver floor and CUDA version still depend on the torch that resolution installs: every
    place that states them says so (the order summary, check's plan, the bundle README)."""
    return any(f.code == PROVISIONAL_CODE for f in findings)


def note_provisional_driver(ctx: Context, out: Findings) -> None:
    """Before resolution, a driver floor for a plan that does not pin torch is provisional: a bare line or
    a dependency's pin may bring a torch built for a newer CUDA (``check --resolve`` decides)."""
    floor = min_driver(ctx)
    if floor is None or not _provisional(ctx):
        return
    out.warning(
        PROVISIONAL_CODE,
        f"driver >= {floor} is provisional: torch is not declared ([torch] version), so a requirement or a "
        "dependency's pin may install a torch built for a newer CUDA, which needs a newer driver; "
        "`envbuild check --resolve` derives the plan from what will be installed",
    )
