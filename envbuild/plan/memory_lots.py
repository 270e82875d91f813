"""Rules about the target cards' memory and lots: the per-device need against usable memory, and the
lots an order takes (within the provider's limits, several lots, idle devices)."""

from __future__ import annotations

from envbuild.catalog import CardEntry
from envbuild.catalog.order import lots_needed
from envbuild.findings import Findings
from envbuild.plan.context import Context, cite


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
                "Several cards do not distribute a program or pool memory automatically, and lots may be "
                "separate machines: training across them needs torch.distributed (DDP/FSDP) over the "
                "network; serving cannot split one model tensor-parallel across lots, so run one server per "
                "lot (a model that fits one lot) or a multi-node serving setup; independent jobs run one "
                "per lot",
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
