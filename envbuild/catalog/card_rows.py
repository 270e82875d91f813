"""Rows of ``cards.toml`` (cards, per-device reserves) and ``prices.toml`` (rental terms, lot prices)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

from envbuild.catalog.rows import (
    DRIVER,
    GFX,
    SM,
    VERSION,
    Row,
    Tier,
    at_least,
    at_most,
    fail,
    not_empty,
    shape,
    shapes,
    sm_cc,
    text,
)
from envbuild.models import Card, Devices, Vendor

_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")
PCI_ID = re.compile(r"^(10de|1002):[0-9a-f]{4}$")  # vendor:device, lower-case hex (NVIDIA, AMD)


def _identity(row: Row, names: tuple[str, ...], pci_ids: tuple[str, ...], source: str | None) -> None:
    """Product names and PCI device ids need a source of their own (pci.ids, a real capture)."""
    for name in names:
        text("product_names", name)
    shapes("pci_ids", pci_ids, PCI_ID, "PCI device id (vendor:device, lower-case hex: 10de:2330)")
    if (names or pci_ids) and not source:
        fail("identity_source", "is required with product_names or pci_ids")


@dataclass(frozen=True, kw_only=True)
class CardEntry(Row, Devices):
    id: str
    name: str
    vendor: Vendor
    arch: str
    memory_gib: float
    cards_per_lot: int
    bf16_tflops: float | None = None
    bandwidth_gbs: float | None = None
    min_cuda: str | None = None
    min_rocm: str | None = None
    min_rocm_tier: Tier = "P"
    min_driver: str | None = None
    host_arch: Literal["x86_64", "aarch64"] = "x86_64"
    devices_per_card: int = 1  # MI250X: 2 GCDs, each its own device
    device_memory_gib: float | None = None  # required when devices_per_card > 1
    # Identity (issue 26): the names nvidia-smi / amd-smi print and the PCI device ids of this card.
    product_names: tuple[str, ...] = ()
    pci_ids: tuple[str, ...] = ()
    identity_source: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        shape("id", self.id, _ID, "card id (lower-case letters, digits and dashes)")
        _identity(self, self.product_names, self.pci_ids, self.identity_source)
        at_least("memory_gib", self.memory_gib, 0)
        at_least("cards_per_lot", self.cards_per_lot, 1)
        at_most("cards_per_lot", self.cards_per_lot, 16)
        at_least("devices_per_card", self.devices_per_card, 1)
        at_most("devices_per_card", self.devices_per_card, 8)
        if not (self.arch == "" or SM.match(self.arch) or GFX.match(self.arch)):
            fail("arch", f"{self.arch!r} is not an arch (sm_XY, gfxNNN, or empty for cpu)")
        shape("min_cuda", self.min_cuda, VERSION, "version")
        shape("min_rocm", self.min_rocm, VERSION, "version")
        shape("min_driver", self.min_driver, DRIVER, "driver version")
        if self.device_memory_gib is not None and not self.device_memory_gib > 0:
            fail("device_memory_gib", f"must be above 0, got {self.device_memory_gib:g}")
        if self.devices_per_card > 1 and self.device_memory_gib is None:
            fail("device_memory_gib", "is required when devices_per_card > 1")
        if self.device_memory_gib is not None and not math.isclose(
            self.device_memory_gib * self.devices_per_card, self.memory_gib
        ):
            fail(
                "device_memory_gib",
                f"devices_per_card x device_memory_gib = {self.devices_per_card} x "
                f"{self.device_memory_gib:g} GiB is not memory_gib ({self.memory_gib:g} GiB)",
            )

    @property
    def cc(self) -> tuple[int, int] | None:
        return sm_cc(self.arch) if self.vendor == "nvidia" else None

    @property
    def card(self) -> Card:
        return Card(
            id=self.id,
            name=self.name,
            vendor=self.vendor,
            arch=self.arch,
            memory_gib=self.memory_gib,
            cards_per_lot=self.cards_per_lot,
            bf16_tflops=self.bf16_tflops,
            bandwidth_gbs=self.bandwidth_gbs,
            min_cuda=self.min_cuda,
            min_rocm=self.min_rocm,
            min_driver=self.min_driver,
            devices_per_card=self.devices_per_card,
            device_memory_gib=self.memory_per_device,
            source=f"{self.source} [{self.tier}]",
        )


@dataclass(frozen=True, kw_only=True)
class LookalikeEntry(Row):
    """A card the catalog does not rent but a renter may get instead of one it does (an H100 NVL for an
    H100 SXM, an RTX 3090 for a 4090, an MI308X for an MI300X): told apart so identity can name it."""

    id: str
    name: str
    vendor: Literal["nvidia", "amd"]
    arch: str
    memory_gib: float
    instead_of: tuple[str, ...]  # catalog card ids it passes for
    product_names: tuple[str, ...] = ()
    pci_ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        shape("id", self.id, _ID, "lookalike id (lower-case letters, digits and dashes)")
        at_least("memory_gib", self.memory_gib, 1)
        not_empty("instead_of", self.instead_of)
        if not (SM.match(self.arch) or GFX.match(self.arch)):
            fail("arch", f"{self.arch!r} is not an arch (sm_XY, gfxNNN)")
        if not (self.product_names or self.pci_ids):
            fail("product_names", "a lookalike needs product_names or pci_ids to be recognised")
        _identity(self, self.product_names, self.pci_ids, self.source)


@dataclass(frozen=True, kw_only=True)
class ReserveEntry(Row):
    """GiB of each device a job cannot use: the runtime context each process creates there."""

    vendor: Literal["nvidia", "amd"]
    gib: float
    what: str  # "the CUDA context", for messages
    cite: str  # a short citation, for messages

    def __post_init__(self) -> None:
        super().__post_init__()
        at_least("gib", self.gib, 0)
        if not self.gib < 16:
            fail("gib", f"must be below 16, got {self.gib:g}")
        text("what", self.what)
        text("cite", self.cite)


def _check(pattern: re.Pattern[str], value: str, what: str) -> str:
    if not pattern.match(value):
        raise ValueError(f"{value!r} is not a valid {what}")
    return value


_DATE = re.compile(r"^\d{4}-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?$")


def check_date(value: str) -> str:
    """``2026-12`` or ``2026-12-15`` (a price's date: when it was read)."""
    return _check(_DATE, value, "date (YYYY-MM-DD or YYYY-MM)")


@dataclass(frozen=True, kw_only=True)
class Terms(Row):
    """The provider's rental terms: durations and how many lots one order may hold."""

    provider: str
    days: tuple[int, ...]
    min_lots: int
    max_lots: int
    cite: str

    def __post_init__(self) -> None:
        super().__post_init__()
        text("provider", self.provider, 2)
        not_empty("days", self.days)
        at_least("min_lots", self.min_lots, 1)
        at_least("max_lots", self.max_lots, 1)
        text("cite", self.cite)
        if self.max_lots < self.min_lots:
            fail("max_lots", f"{self.max_lots} is below min_lots {self.min_lots}")
        if any(d < 1 for d in self.days) or list(self.days) != sorted(set(self.days)):
            fail("days", f"must be increasing positive numbers, got {list(self.days)}")


@dataclass(frozen=True, kw_only=True)
class PriceEntry(Row):
    """One card's lot prices: days -> USD for one lot (all the lot's cards) for that duration."""

    card: str
    usd: dict[int, float]
    date: str
    cite: str

    def __post_init__(self) -> None:
        super().__post_init__()
        not_empty("usd", self.usd)
        bad = [f"{days}: {usd!r}" for days, usd in self.usd.items() if not usd > 0]
        if bad:
            fail("usd", f"USD per lot must be positive ({', '.join(bad)})")
        shape("date", self.date, _DATE, "date (YYYY-MM-DD or YYYY-MM)")
        text("cite", self.cite)
