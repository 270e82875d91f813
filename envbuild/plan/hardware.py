"""Rules about the target cards: vendor, arch coverage, toolkit minimums, driver, memory, lots."""

from __future__ import annotations

import math

from packaging.version import Version

from envbuild.plan.blender import optix_driver
from envbuild.plan.context import Context
from envbuild.plan.findings import Findings
from envbuild.plan.suggest import newer_toolkit, suggest_cuda, suggest_rocm
from envbuild.plan.versions import cubin_covers, driver_at_least, max_driver, ptx_covers

_BACKEND_VENDOR = {"cuda": "nvidia", "rocm": "amd"}


def check_vendor(ctx: Context, out: Findings) -> None:
    backend = ctx.backend
    if backend != "cpu" and not ctx.cards:
        out.warning(
            "W-NO-TARGET",
            f"backend {backend} without accelerator.targets: arch, memory and driver checks are skipped; "
            "name the card with --target or accelerator.targets",
        )
    for card in ctx.cards:
        if card.host_arch != "x86_64":
            same = [c.id for c in ctx.catalog.cards if c.arch == card.arch and c.host_arch == "x86_64"]
            alt = f"e.g. {' or '.join(same)} ({card.arch})" if same else "see `envbuild targets`"
            out.error(
                "E-HOST-ARCH",
                f"{card.name} ({card.id}) sits on an {card.host_arch} host; envbuild renders x86_64 images "
                "that cannot run there (PyTorch's aarch64 CUDA wheels start at 2.9 and need an aarch64 "
                f"image). Choose an x86_64 card: {alt}.",
            )
        if backend == "cpu":
            if card.vendor != "cpu":
                out.warning(
                    "W-GPU-UNUSED",
                    f"backend cpu on {card.name} ({card.id}): the image has no GPU runtime and the card "
                    "would "
                    "sit idle; set accelerator.backend = "
                    f'"{"cuda" if card.vendor == "nvidia" else "rocm"}" '
                    "to use it, or target cpu",
                )
            continue
        want = _BACKEND_VENDOR[backend]
        if card.vendor != want:
            fix = {"nvidia": "cuda", "amd": "rocm", "cpu": "cpu"}[card.vendor]
            out.error(
                "E-VENDOR-MISMATCH",
                f"backend {backend} needs an {want.upper() if want == 'amd' else 'NVIDIA'} card, but "
                f"{card.name} ({card.id}) is "
                f"{'a CPU-only machine' if card.vendor == 'cpu' else card.vendor}; "
                f'use accelerator.backend = "{fix}" or an {"AMD" if want == "amd" else "NVIDIA"} target',
            )


def check_arch(ctx: Context, out: Findings) -> None:
    """Same-major cubin rule, +PTX JIT rule (CUDA); exact gfx match (ROCm)."""
    label = ctx.torch_label
    for card in ctx.gpu_cards:
        if ctx.cuda_wheel is not None and card.vendor == "nvidia" and card.cc is not None:
            wheel = ctx.cuda_wheel
            archs = ", ".join(wheel.archs)
            cubin = cubin_covers(wheel.cubins, card.cc)
            if cubin is not None:
                if cubin != card.cc:
                    out.info(
                        "I-ARCH-COMPAT",
                        f"{card.id} ({card.arch}) runs the sm_{cubin[0]}{cubin[1]} cubins of {label} "
                        "(same-major binary compatibility)",
                    )
            elif ptx_covers(wheel.ptx, card.cc):
                tk = ctx.toolkit
                drv = f" (>= {tk.driver} for CUDA {tk.image_version})" if tk else ""
                out.warning(
                    "W-ARCH-PTX-JIT",
                    f"{label} has no {card.arch} cubin ({archs}); {card.name} only runs it by "
                    "JIT-compiling the "
                    f"+PTX at first use: slow first start, and the driver must be at least as new as the "
                    f"toolkit{drv}",
                )
            else:
                out.error(
                    "E-ARCH-MISSING",
                    f"{label} carries {archs} and no compatible +PTX: {card.name} ({card.arch}) would fail "
                    "with "
                    f"'no kernel image is available'. {suggest_cuda(ctx, card)}.",
                )
        if ctx.rocm_wheel is not None and card.vendor == "amd" and card.arch not in ctx.rocm_wheel.targets:
            out.error(
                "E-ARCH-MISSING",
                f"{label} is built for {', '.join(ctx.rocm_wheel.targets)}: no {card.arch} kernels for "
                f"{card.name}. {suggest_rocm(ctx, card)}.",
            )


def check_toolkit_minimums(ctx: Context, out: Findings) -> None:
    for card in ctx.gpu_cards:
        tk, rv = ctx.toolkit, ctx.rocm
        if card.vendor == "nvidia" and tk and card.min_cuda and Version(tk.version) < Version(card.min_cuda):
            msg = f"{card.name} needs CUDA >= {card.min_cuda}; the plan uses CUDA {tk.version}. "
            if ctx.patch is not None or ctx.compiles:
                out.error("E-TOOLKIT-TOO-OLD", msg + newer_toolkit(ctx, card.min_cuda, cuda=True))
            else:  # nothing in the image runs or builds CUDA code (Blender ships its own kernels)
                out.warning(
                    "W-TOOLKIT-OLD",
                    msg + "Nothing in this image is built with it, so only the driver matters; set "
                    f"accelerator.version >= {card.min_cuda} before adding CUDA code",
                )
        if card.vendor == "amd" and rv and card.min_rocm and Version(rv.version) < Version(card.min_rocm):
            unconfirmed = card.min_rocm_tier == "unconfirmed"
            note = " (minimum unconfirmed)" if unconfirmed else ""
            msg = (
                f"{card.name} needs ROCm >= {card.min_rocm}{note}; "
                f"the plan uses ROCm {rv.version}. " + newer_toolkit(ctx, card.min_rocm, cuda=False)
            )
            if unconfirmed:
                out.warning("W-ROCM-TOO-OLD", msg)
            else:
                out.error("E-ROCM-TOO-OLD", msg)
        if (
            card.vendor == "nvidia"
            and card.cc is not None
            and card.cc < (8, 0)
            and ctx.patch is not None
            and Version(ctx.patch.version) >= Version("2.7")
            and ctx.backend == "cuda"
        ):
            out.warning(
                "W-TRITON-ARCH",
                f"{ctx.torch_label} ships Triton {ctx.patch.triton}; Triton dropped Turing and older "
                f"({card.arch}) in 3.3, so torch.compile/Triton kernels fail on {card.name}; use torch <= "
                "2.6 "
                "for Triton there",
            )


def min_driver(ctx: Context) -> str | None:
    """The driver to order: the toolkit's, the cards' (Blackwell R570+), Blender OptiX's."""
    if ctx.backend != "cuda" or ctx.toolkit is None:
        return None
    cards = (c.min_driver for c in ctx.gpu_cards if c.vendor == "nvidia")
    return max_driver(ctx.toolkit.driver, *cards, optix_driver(ctx))


def check_driver(ctx: Context, out: Findings) -> None:
    tk = ctx.toolkit
    if ctx.driver is not None and ctx.backend != "cuda":
        out.info(
            "I-DRIVER-IGNORED", f"--driver {ctx.driver} applies to NVIDIA cards; backend is {ctx.backend}"
        )
        return
    if ctx.backend != "cuda" or tk is None:
        return
    family = ctx.catalog.cuda_family(tk.major)
    floor = family.driver if family else tk.driver
    need = min_driver(ctx) or tk.driver
    if ctx.driver is None:
        why = [f"CUDA {tk.image_version}"]
        if need != tk.driver:  # a card (Blackwell R570+) or Blender OptiX asks for more than the toolkit
            why += [f"{c.id} needs {c.min_driver}" for c in ctx.gpu_cards if c.min_driver == need]
            optix = optix_driver(ctx)
            if optix == need:
                why.append(f"Blender OptiX needs {optix}")
        out.info(
            "I-DRIVER-UNKNOWN",
            f"no --driver given: order a machine with NVIDIA driver >= {need} ({'; '.join(why)}); "
            f"{floor} is the CUDA {tk.major}.x floor under minor-version compatibility (limited features)",
        )
        return
    drv = ctx.driver
    for card in ctx.gpu_cards:
        if card.min_driver and not driver_at_least(drv, card.min_driver):
            out.error(
                "E-DRIVER-CARD",
                f"{card.name} needs driver >= {card.min_driver} (R570+ for Blackwell); "
                f"driver {drv} cannot drive it",
            )
    if not driver_at_least(drv, floor):
        out.error(
            "E-DRIVER-TOO-OLD",
            f"driver {drv} is older than {floor}, the minimum for any CUDA {tk.major}.x application "
            f"(minor-version compatibility); {ctx.torch_label} needs CUDA {tk.image_version}: order driver "
            f">= {need}, or choose an older CUDA variant",
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
                f"new as CUDA {tk.image_version} (>= {tk.driver}); driver {drv} is older",
            )
        else:
            out.warning(
                "W-DRIVER-MINOR-COMPAT",
                f"driver {drv} is below {tk.driver} (CUDA {tk.image_version}) but >= {floor}: it runs under "
                "minor-version compatibility with a limited feature set (no JIT of newer PTX); an "
                "nvidia/cuda base image also sets NVIDIA_REQUIRE_CUDA, so the container toolkit may refuse "
                f"to start it on this driver: prefer a machine with driver >= {tk.driver}",
            )


def check_memory_and_lots(ctx: Context, out: Findings) -> None:
    res = ctx.profile.resources
    need = res.gpu_memory_gib
    for card in ctx.cards:
        if card.vendor == "cpu":
            if need:
                out.warning(
                    "W-MEMORY-NO-GPU",
                    f"resources.gpu_memory_gib = {need:g} but target {card.id} has no GPU memory",
                )
            continue
        if need is not None:
            if need > card.memory_gib:
                cards = max(res.gpus, card.cards_per_lot)
                total = card.memory_gib * cards
                bigger = sorted(
                    (
                        c
                        for c in ctx.catalog.cards
                        if c.vendor == card.vendor and c.memory_gib >= need and c.host_arch == "x86_64"
                    ),
                    key=lambda c: (c.memory_gib, c.id),
                )
                fits = ", ".join(f"{c.id} ({c.memory_gib:g} GiB)" for c in bigger)
                msg = (
                    f"the job needs {need:g} GiB per card; {card.name} has {card.memory_gib:g} GiB. Choose a "
                    f"card with more memory{f' ({fits})' if fits else ''}, or shard the model and set the "
                    "per-card peak."
                )
                if total >= need:
                    msg += (
                        f" Cards do not pool memory: {cards} x {card.memory_gib:g} GiB = {total:g} GiB "
                        "would hold "
                        "it only if the program splits the model itself (FSDP, tensor/pipeline parallel)."
                    )
                out.error("E-MEMORY-PER-CARD", msg)
            elif need > 0.9 * card.memory_gib:
                out.warning(
                    "W-MEMORY-TIGHT",
                    f"{need:g} GiB of {card.memory_gib:g} GiB on {card.name}: less than 10% headroom for the "
                    "CUDA/ROCm context, fragmentation and the allocator",
                )
        lots = math.ceil(res.gpus / card.cards_per_lot)
        if res.gpus > card.cards_per_lot:
            out.warning(
                "W-MULTI-LOT",
                f"resources.gpus = {res.gpus}: {lots} lots of {card.id} ({card.cards_per_lot} card(s) per "
                "lot). "
                "Several cards do not distribute a program or pool memory automatically: the job must use "
                "torch.distributed (DDP/FSDP) across them",
            )
        elif res.gpus < card.cards_per_lot:
            out.info(
                "I-LOT-IDLE",
                f"a {card.id} lot has {card.cards_per_lot} cards; resources.gpus = {res.gpus} leaves "
                f"{card.cards_per_lot - res.gpus} idle",
            )
