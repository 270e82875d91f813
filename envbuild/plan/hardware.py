"""Rules about the target cards: vendor, arch coverage, toolkit minimums.

The host driver to order is :mod:`envbuild.plan.host_driver`; memory per device and lots are
:mod:`envbuild.plan.memory_lots`."""

from __future__ import annotations

from packaging.version import Version

from envbuild.findings import Findings
from envbuild.plan.context import Context, cite
from envbuild.plan.suggest import newer_toolkit, suggest_cuda, suggest_rocm
from envbuild.versions import cubin_covers, ptx_covers

_BACKEND_VENDOR = {"cuda": "nvidia", "rocm": "amd"}


def check_vendor(ctx: Context, out: Findings) -> None:
    backend = ctx.backend
    if backend != "cpu" and not ctx.cards:
        out.warning(
            "W-NO-TARGET",
            f"{ctx.setting('accelerator.backend')} without accelerator.targets: arch, memory and driver "
            "checks are skipped; name the card with --target or accelerator.targets",
        )
    for card in ctx.cards:
        if card.host_arch != "x86_64":
            same = [c.id for c in ctx.catalog.cards if c.arch == card.arch and c.host_arch == "x86_64"]
            alt = f"e.g. {' or '.join(same)} ({card.arch})" if same else "see `envbuild targets`"
            out.error(
                "E-HOST-ARCH",
                f"{card.name} ({card.id}) sits on an {card.host_arch} host; envbuild renders x86_64 images "
                "that cannot run there (PyTorch's aarch64 CUDA wheels start at 2.9 and need an aarch64 "
                f"image). Choose an x86_64 card instead of {ctx.setting('accelerator.targets')}: {alt}.",
                source=cite((card.id, card)),
            )
        if backend == "cpu":
            if card.vendor != "cpu":
                out.warning(
                    "W-GPU-UNUSED",
                    f"{ctx.setting('accelerator.backend')} on {card.name} ({card.id}): the image has no GPU "
                    "runtime and the card would sit idle; set accelerator.backend = "
                    f'"{"cuda" if card.vendor == "nvidia" else "rocm"}" '
                    "to use it, or target cpu",
                )
            continue
        want = _BACKEND_VENDOR[backend]
        if card.vendor != want:
            fix = {"nvidia": "cuda", "amd": "rocm", "cpu": "cpu"}[card.vendor]
            need = "AMD" if want == "amd" else "NVIDIA"
            is_ = {"cpu": "a CPU-only machine", "amd": "an AMD card", "nvidia": "an NVIDIA card"}[card.vendor]
            out.error(
                "E-VENDOR-MISMATCH",
                f"{ctx.setting('accelerator.backend')} needs an {need} card, but {card.name} ({card.id}) is "
                f'{is_} ({ctx.setting("accelerator.targets")}); set accelerator.backend = "{fix}", or '
                f"choose an {need} target",
                source=cite((card.id, card)),
            )


def check_arch(ctx: Context, out: Findings) -> None:
    """Same-major cubin rule, +PTX JIT rule (CUDA); exact gfx match (ROCm)."""
    label = ctx.torch_label
    for card in ctx.gpu_cards:
        if ctx.cuda_wheel is not None and card.vendor == "nvidia" and card.cc is not None:
            wheel = ctx.cuda_wheel
            archs = ", ".join(wheel.archs)
            src = cite((f"{label} arch list", wheel), (card.id, card))
            cubin = cubin_covers(wheel.cubins, card.cc)
            if cubin is not None:
                if cubin != card.cc:
                    out.info(
                        "I-ARCH-COMPAT",
                        f"{card.id} ({card.arch}) runs the sm_{cubin[0]}{cubin[1]} cubins of {label} "
                        "(same-major binary compatibility)",
                        source=src,
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
                    source=src,
                )
            else:
                out.error(
                    "E-ARCH-MISSING",
                    f"{label} carries {archs} and no compatible +PTX: {card.name} ({card.arch}) would fail "
                    "with "
                    f"'no kernel image is available'. {suggest_cuda(ctx, card)}.",
                    source=src,
                )
        if ctx.rocm_wheel is not None and card.vendor == "amd" and card.arch not in ctx.rocm_wheel.targets:
            out.error(
                "E-ARCH-MISSING",
                f"{label} is built for {', '.join(ctx.rocm_wheel.targets)}: no {card.arch} kernels for "
                f"{card.name}. {suggest_rocm(ctx, card)}.",
                source=cite((f"{label} gfx list", ctx.rocm_wheel), (card.id, card)),
            )


def check_toolkit_minimums(ctx: Context, out: Findings) -> None:
    for card in ctx.gpu_cards:
        tk, rv = ctx.toolkit, ctx.rocm
        if card.vendor == "nvidia" and tk and card.min_cuda and Version(tk.version) < Version(card.min_cuda):
            msg = f"{card.name} needs CUDA >= {card.min_cuda}; {_uses(ctx, 'CUDA', tk.version)}. "
            src = cite((card.id, card), (f"CUDA {tk.version}", tk))
            if ctx.patch is not None or ctx.compiles:
                out.error("E-TOOLKIT-TOO-OLD", msg + newer_toolkit(ctx, card.min_cuda, cuda=True), source=src)
            else:  # nothing in the image runs or builds CUDA code (Blender ships its own kernels)
                out.warning(
                    "W-TOOLKIT-OLD",
                    msg + "Nothing in this image is built with it, so only the driver matters; set "
                    f"accelerator.version >= {card.min_cuda} before adding CUDA code",
                    source=src,
                )
        if card.vendor == "amd" and rv and card.min_rocm and Version(rv.version) < Version(card.min_rocm):
            unconfirmed = card.min_rocm_tier == "unconfirmed"
            note = " (minimum unconfirmed)" if unconfirmed else ""
            msg = (
                f"{card.name} needs ROCm >= {card.min_rocm}{note}; "
                f"{_uses(ctx, 'ROCm', rv.version)}. " + newer_toolkit(ctx, card.min_rocm, cuda=False)
            )
            src = cite((card.id, card), (f"ROCm {rv.version}", rv))
            if unconfirmed:
                out.warning("W-ROCM-TOO-OLD", msg, source=src)
            else:
                out.error("E-ROCM-TOO-OLD", msg, source=src)
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
                f"({card.arch}) in 3.3, so torch.compile/Triton kernels fail on {card.name}; to use Triton "
                f"there, set torch.version to 2.6 or older (now {ctx.torch_setting()})",
                source=cite((f"torch {ctx.patch.version}", ctx.patch), (card.id, card)),
            )


def _uses(ctx: Context, kind: str, version: str) -> str:
    """``accelerator.version = "12.6" (inherited ...) selects CUDA 12.6``, or ``the plan uses CUDA 12.6``."""
    if ctx.profile.accelerator.version:
        return f"{ctx.setting('accelerator.version')} selects {kind} {version}"
    return f"the plan uses {kind} {version}"
