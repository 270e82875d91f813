"""Cards and lot prices as the plan and the lock see them (from :mod:`envbuild.catalog`'s rows)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Vendor = Literal["nvidia", "amd", "cpu"]


# --------------------------------------------------------------------------------------------------
# Catalog rows (output of envbuild.catalog)
# --------------------------------------------------------------------------------------------------


class Devices:
    """What a card is to the OS and torch: one device, or several (an MI250X is two GCDs of 64 GiB).

    Shared by catalog cards, plan cards and lock targets; the fields are the models' own."""

    memory_gib: float
    cards_per_lot: int
    devices_per_card: int
    device_memory_gib: float | None

    @property
    def memory_per_device(self) -> float:
        """GiB of one device as the OS and torch see it (a whole card unless it has several)."""
        return self.device_memory_gib if self.device_memory_gib is not None else self.memory_gib

    @property
    def devices_per_lot(self) -> int:
        return self.cards_per_lot * self.devices_per_card


@dataclass(frozen=True, kw_only=True)
class Card(Devices):
    id: str  # "h100", "b200", "rtx4090", "mi300x", "cpu"
    name: str
    vendor: Vendor
    arch: str  # "sm_90", "gfx942", "" for cpu
    memory_gib: float
    cards_per_lot: int = 1
    bf16_tflops: float | None = None
    bandwidth_gbs: float | None = None
    min_cuda: str | None = None
    min_rocm: str | None = None
    min_driver: str | None = None
    source: str
    devices_per_card: int = 1  # devices the OS and torch see per card (MI250X: 2 GCDs)
    device_memory_gib: float | None = None  # GiB per device; None: the whole card is one device


@dataclass(frozen=True, kw_only=True)
class LotPrice:
    """The price of one lot of a card (every card of the lot) for a duration, with where it came from."""

    card: str  # card id
    days: int
    usd: float
    source: str  # "IteraGPU rate, provider guide ..." or the user's price file's own `source`
    date: str  # when the price was read: "2026-12" or "2026-12-15"
