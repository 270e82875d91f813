"""Rules about the target cards: vendor, arch coverage, toolkit minimums, driver, memory, lots."""

from __future__ import annotations

from packaging.version import Version

from envbuild.catalog import CardEntry
from envbuild.catalog.order import lots_needed
from envbuild.plan.blender import optix_driver
from envbuild.plan.context import Context, cite
from envbuild.plan.findings import Findings
from envbuild.plan.suggest import newer_toolkit, suggest_cuda, suggest_rocm
from envbuild.plan.versions import cubin_covers, driver_at_least, max_driver, ptx_covers

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


def _gib(value: float) -> str:
    return f"{round(value, 2):g} GiB"


def _device_phrase(card: CardEntry) -> str:
    """``an MI250X is two devices of 64 GiB each (GCDs, ...)`` for multi-device cards, else ''."""
    if card.devices_per_card == 1:
        return ""
    count = {2: "two", 4: "four", 8: "eight"}.get(card.devices_per_card, str(card.devices_per_card))
    return (
        f"an {card.name.split()[-1]} is {count} devices of {_gib(card.memory_per_device)} each "
        "(GCDs: the OS and torch see each as its own device)"
    )


def _usable_phrase(ctx: Context, card: CardEntry) -> str:
    """``H100 SXM 80GB 80 GiB: at most ~79 GiB usable (reserve 1 GiB for the CUDA context)``."""
    reserve = ctx.catalog.reserve(card.vendor)
    usable = ctx.catalog.usable_gib(card)
    per = " per device" if card.devices_per_card > 1 else ""
    why = f" (reserve {_gib(reserve.gib)} for {reserve.what})" if reserve else ""
    return f"{card.name} {_gib(card.memory_per_device)}{per}: at most ~{_gib(usable)} usable{why}"


def _memory_source(ctx: Context, card: CardEntry) -> str | None:
    """The card's row and the reserve's: where the usable memory comes from."""
    reserve = ctx.catalog.reserve(card.vendor)
    return cite((card.id, card), (f"{card.vendor} memory reserve", reserve))


def _uses(ctx: Context, kind: str, version: str) -> str:
    """``accelerator.version = "12.6" (inherited ...) selects CUDA 12.6``, or ``the plan uses CUDA 12.6``."""
    if ctx.profile.accelerator.version:
        return f"{ctx.setting('accelerator.version')} selects {kind} {version}"
    return f"the plan uses {kind} {version}"


def check_memory(ctx: Context, card: CardEntry, out: Findings) -> None:
    """The per-device need against usable memory: at or above it an error, under 10% headroom a warning."""
    res = ctx.profile.resources
    need = res.gpu_memory_gib
    if need is None:
        return
    usable = ctx.catalog.usable_gib(card)
    devices = _device_phrase(card)
    if need >= usable:
        bigger = sorted(
            (
                c
                for c in ctx.catalog.cards
                if c.vendor == card.vendor and c.host_arch == "x86_64" and ctx.catalog.usable_gib(c) > need
            ),
            key=lambda c: (c.memory_per_device, c.id),
        )
        fits = ", ".join(
            f"{c.id} ({_gib(c.memory_per_device)}{' per device' if c.devices_per_card > 1 else ''})"
            for c in bigger
        )
        msg = (
            f"{ctx.setting('resources.gpu_memory_gib')}: the job needs {_gib(need)} per device; "
            f"{_usable_phrase(ctx, card)}"
            f"{f'; {devices}' if devices else ''}. Choose a card with more memory"
            f"{f' ({fits})' if fits else ''}, or shard the model and set the per-device peak."
        )
        count = max(res.gpus, card.devices_per_lot)
        total = card.memory_per_device * count
        if need > card.memory_per_device and total >= need:
            unit = "Cards" if card.devices_per_card == 1 else "Devices (and cards)"
            msg += (
                f" {unit} do not pool memory: {count} x {_gib(card.memory_per_device)} = {_gib(total)} would "
                "hold it only if the program splits the model itself (FSDP, tensor/pipeline parallel)."
            )
        out.error("E-MEMORY-PER-CARD", msg, source=_memory_source(ctx, card))
    elif need > 0.9 * usable:
        headroom = usable - need
        out.warning(
            "W-MEMORY-TIGHT",
            f"{ctx.setting('resources.gpu_memory_gib')}: {_gib(need)} per device leaves {_gib(headroom)} "
            f"headroom ({headroom / usable:.1%}, under 10%) on "
            f"{_usable_phrase(ctx, card)}{f'; {devices}' if devices else ''}: little room for fragmentation "
            "and the allocator; measure the peak in the pilot",
            source=_memory_source(ctx, card),
        )


def check_memory_and_lots(ctx: Context, out: Findings) -> None:
    """Memory per device, then lots: within the provider's limits, several lots, idle devices."""
    res = ctx.profile.resources
    need = res.gpu_memory_gib
    terms = ctx.catalog.terms
    for card in ctx.cards:
        if card.vendor == "cpu":
            if need:
                out.warning(
                    "W-MEMORY-NO-GPU",
                    f"{ctx.setting('resources.gpu_memory_gib')} but target {card.id} has no GPU memory; "
                    "remove it, or target a GPU card",
                )
            continue
        check_memory(ctx, card, out)
        per_lot = card.devices_per_lot
        unit = "card" if card.devices_per_card == 1 else "device"
        lots = lots_needed(res.gpus, per_lot)
        gpus = ctx.setting("resources.gpus")
        if card.devices_per_card > 1:
            out.info(
                "I-CARD-DEVICES",
                f"{_device_phrase(card)}: resources.gpus and gpu_memory_gib count devices, so {gpus} is "
                f"{lots * card.cards_per_lot} {card.id} card(s) in {lots} lot(s)",
                source=cite((card.id, card)),
            )
        if lots > terms.max_lots:
            most = terms.max_lots * per_lot
            vendor = "AMD" if card.vendor == "amd" else "NVIDIA"
            more = sorted(
                {
                    c.id
                    for c in ctx.catalog.cards
                    if c.vendor == card.vendor and c.host_arch == "x86_64" and c.devices_per_lot > per_lot
                }
            )
            alt = (
                f", or a card with more {unit}s per lot: {', '.join(more)}"
                if more
                else f" (no {vendor} card in the catalog has more than {per_lot} {unit}s per lot)"
            )
            out.error(
                "E-LOTS-MAX",
                f"{gpus} needs {lots} lots of {card.id} ({per_lot} {unit}(s) per lot), "
                f"but {terms.provider} rents {terms.min_lots} to {terms.max_lots} lots per order: "
                f"at most {most} gpus fit on {card.id}. Use gpus <= {most}{alt}",
                source=cite((f"{terms.provider} terms", terms), (card.id, card)),
            )
        if lots > 1:
            out.warning(
                "W-MULTI-LOT",
                f"{gpus}: {lots} lots of {card.id} ({card.cards_per_lot} card(s) per lot). "
                "Several cards do not distribute a program or pool memory automatically: the job must use "
                "torch.distributed (DDP/FSDP) across them",
                source=cite((card.id, card)),
            )
        idle = lots * per_lot - res.gpus
        if idle > 0:
            ordered = f"{lots} lot{'s' if lots > 1 else ''} = {lots * per_lot} {unit}s"
            out.info(
                "I-LOT-IDLE",
                f"each {card.id} lot has {per_lot} {unit}s; {gpus} orders {ordered}, so "
                f"{idle} {unit}{'s stay' if idle > 1 else ' stays'} idle in the last lot (paid for: use "
                f"gpus = {lots * per_lot}, or accept the idle {unit})",
                source=cite((card.id, card)),
            )


def note_provisional_driver(ctx: Context, out: Findings) -> None:
    """Before resolution, a driver floor for a plan that does not pin torch is provisional: a bare line or
    a dependency's pin may bring a torch built for a newer CUDA (``check --resolve`` decides)."""
    if ctx.served is not None or ctx.resolved is not None or ctx.patch is not None or ctx.uncataloged:
        return
    floor = min_driver(ctx)
    if floor is None or not any(line.kind == "requirement" for line in ctx.profile.python.lines):
        return
    out.warning(
        "W-DRIVER-PROVISIONAL",
        f"driver >= {floor} is provisional: torch is not declared ([torch] version), so a requirement or a "
        "dependency's pin may install a torch built for a newer CUDA, which needs a newer driver; "
        "`envbuild check --resolve` derives the plan from what will be installed",
    )
