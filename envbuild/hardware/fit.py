"""The fit rules: the card received is the card ordered (identity), there are enough devices
(``resources.gpus``), and each holds the declared memory need.  Run by
:func:`envbuild.hardware.rules.judge`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from envbuild.hardware.identity import Identity, identify
from envbuild.hardware.judge import Judge, gib, label

if TYPE_CHECKING:
    from envbuild.catalog import CardEntry
    from envbuild.models.hardware import DeviceFacts


def _ordered(targets: tuple[CardEntry, ...]) -> str:
    return " or ".join(f"{t.id} ({t.name})" for t in targets)


def _at_least_as_good(got: CardEntry, want: CardEntry) -> bool:
    """``got`` is another catalog card with no less memory per device and compute than ``want``."""
    return (
        got.vendor == want.vendor
        and got.memory_per_device >= want.memory_per_device
        and (got.bf16_tflops or 0) >= (want.bf16_tflops or 0)
    )


def _judge_identity(j: Judge, dev: DeviceFacts, who: Identity) -> None:
    targets = j.order.targets
    ids = {t.id for t in targets}
    ask = "ask the provider for the card ordered, or for a refund"
    if who.kind == "card" and who.card is not None:
        if who.card.id in ids:
            return
        msg = (
            f"{label(dev)} is {who.card.name} (card {who.card.id}; {who.evidence}), not the card ordered: "
            f"{_ordered(targets)}"
        )
        if all(_at_least_as_good(who.card, t) for t in targets):
            j.out.warning(
                "W-HW-IDENTITY",
                f"{msg}; it has no less memory or compute; check it with `--target {who.card.id}`",
                source=who.source,
            )
        else:
            j.out.error("E-HW-IDENTITY", f"{msg}: {ask}", source=who.source)
    elif who.kind == "lookalike" and who.lookalike is not None:
        row = who.lookalike
        j.out.error(
            "E-HW-IDENTITY",
            f"{label(dev)} is not the card ordered ({_ordered(targets)}): it is {row.name} (lookalike "
            f"{row.id}; {who.evidence}), rented in place of {', '.join(row.instead_of)}: {ask}",
            source=who.source,
        )
    else:
        per = [t.memory_per_device for t in targets]
        if dev.memory_total_mib and per and dev.memory_total_mib / 1024 < 0.85 * min(per):
            j.out.error(
                "E-HW-IDENTITY",
                f"{label(dev)} is not a card the catalog knows ({who.evidence}) and holds "
                f"{gib(dev.memory_total_mib)}, less than the {min(per):g} GiB of the card ordered "
                f"({_ordered(targets)}): {ask}",
            )
        else:
            j.skip("identity", f"{label(dev)}: {who.evidence} is not in the catalog")


def identity(j: Judge) -> None:
    """Each device is a card ordered (by product name or PCI device id); a lookalike or a smaller card
    is an error, a catalog card at least as good a warning."""
    if not j.facts.devices:
        return
    if not j.order.targets:
        j.skip("identity", "no target card ordered (accelerator.targets or --target)")
        return
    vendors = {t.vendor for t in j.order.targets}
    if j.facts.vendor not in vendors:
        j.out.error(
            "E-HW-IDENTITY",
            f"{j.where} shows {j.facts.vendor} cards; ordered: {_ordered(j.order.targets)}: ask the provider "
            "for the card ordered, or check the profile's targets",
        )
        return
    for dev in j.facts.devices:
        _judge_identity(j, dev, identify(dev, j.catalog, pci_ids=j.pci_ids))


def count(j: Judge) -> None:
    """At least ``resources.gpus`` devices."""
    n, want = len(j.facts.devices), j.order.gpus
    if n < want:
        j.out.error(
            "E-HW-COUNT",
            f"{j.where} lists {n} device(s); the job needs {want} (resources.gpus): order more lots, or "
            "lower resources.gpus",
        )


def lots(j: Judge) -> None:
    """One capture is one machine.  Against an order of several lots that each hold fewer devices than
    the capture shows (8 one-card lots, a capture of an 8-card machine), say both: the provider rents
    lots, and may place them on one machine (as this one) or on several (information, not an error)."""
    from envbuild.catalog.order import lots_needed

    n = len(j.facts.devices)
    for card in j.order.targets:
        per_lot = card.cards_per_lot * card.devices_per_card
        ordered = lots_needed(j.order.gpus, per_lot)
        if card.vendor != j.facts.vendor or ordered < 2 or n <= per_lot:
            continue
        j.out.info(
            "I-HW-LOTS",
            f"{j.where} shows {n} devices in one machine; the order is {ordered} lots of {card.id} "
            f"({per_lot} device(s) per lot, resources.gpus = {j.order.gpus}): ask the provider whether the "
            f"{ordered} lots come as this one machine or as {ordered} machines (a job across machines "
            "needs torch.distributed over the network)",
        )


def memory(j: Judge) -> None:
    """Each device holds the declared per-device need plus the runtime context (the catalog's reserve)."""
    need = j.order.gpu_memory_gib
    if need is None:
        return
    reserve = j.catalog.reserve(j.facts.vendor)
    context = reserve.gib if reserve else 0.0
    for dev in j.facts.devices:
        if dev.memory_total_mib is None:
            j.skip("memory", f"memory size not reported by {j.facts.source}")
            continue
        usable = dev.memory_total_mib / 1024 - context
        if need >= usable:
            j.out.error(
                "E-HW-MEMORY",
                f"{label(dev)} holds {gib(dev.memory_total_mib)}, at most ~{usable:.1f} GiB usable (reserve "
                f"{context:g} GiB for the runtime context); the job needs {need:g} GiB per device "
                "(resources.gpu_memory_gib): order a card with more memory, or shard the model",
                source=reserve.cite if reserve else None,
            )
