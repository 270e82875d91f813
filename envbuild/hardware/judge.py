"""What the hardware rules share: the order they judge against, the run's state (findings, what went
unjudged), and how a device is named and its load read."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from envbuild.catalog import CardEntry, Catalog
    from envbuild.findings import Findings
    from envbuild.models.hardware import DeviceFacts, HardwareFacts

# A card at or above this utilization is under load: PCIe generation is judged and slowdowns are
# errors.  Below IDLE_PCT (or with NVML's gpu_idle reason) it is idle: links drop to a low generation
# to save power, so only the width is judged.
LOADED_PCT = 50.0
IDLE_PCT = 10.0


@dataclass(frozen=True, kw_only=True)
class Order:
    """What was ordered: the profile's targets, ``resources.gpus`` and the per-device memory need."""

    targets: tuple[CardEntry, ...] = ()
    gpus: int = 1
    gpu_memory_gib: float | None = None


@dataclass(kw_only=True)
class Judge:
    facts: HardwareFacts
    order: Order
    catalog: Catalog
    out: Findings
    own_pids: Collection[int] = ()  # the validator's own processes (a live reading)
    pci_ids: Path | None = None  # the pci.ids file; default the machine's
    unjudged: dict[str, list[str]] = field(default_factory=dict)

    def skip(self, rule: str, why: str) -> None:
        reasons = self.unjudged.setdefault(rule, [])
        if why not in reasons:
            reasons.append(why)

    @property
    def where(self) -> str:
        return f"{self.facts.source}{f' ({self.facts.path})' if self.facts.path else ''}"


def label(dev: DeviceFacts) -> str:
    return f"device {dev.index} ({dev.name or 'unnamed'})"


def gib(mib: float) -> str:
    return f"{mib / 1024:.1f} GiB"


def load(dev: DeviceFacts) -> str:
    """ "loaded", "idle" or "unknown" (no utilization reported, or light use in between)."""
    if dev.clock_event_reasons and "gpu_idle" in dev.clock_event_reasons:
        return "idle"
    util = dev.utilization_gpu_pct
    if util is None:
        return "unknown"
    return "loaded" if util >= LOADED_PCT else "idle" if util < IDLE_PCT else "unknown"
