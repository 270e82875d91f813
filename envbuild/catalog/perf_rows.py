"""Rows of ``performance.toml``: each card's datasheet figures, what healthy cards achieve, and how close
to either a healthy card gets.

The ``performance`` validate stage (:mod:`envbuild.validate.performance`) compares what it measures with
``fraction x reference``: the reference is what healthy cards of the kind achieve (``[[achieved]]``, matmul
only) where a row has it, else the datasheet; the fraction is below the lowest figure published for
healthy cards (each ``[[threshold]]`` row says which measurements it rests on), so a card under it is not
merely unlucky.  The matmul fraction of the datasheet is per vendor (the lock's backend: cuda = NVIDIA,
rocm = AMD).  Units: TFLOP/s dense (no sparsity), GB/s = 10^9 bytes per second, interconnect per GPU and
direction.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from envbuild.boundary import INPUT
from envbuild.catalog.rows import Row, at_least, at_most, fail, text

Figure = Literal["matmul", "memory_copy", "host_to_device", "device_to_host", "peer_copy", "all_reduce_busbw"]
FIGURES: tuple[Figure, ...] = (
    "matmul",
    "memory_copy",
    "host_to_device",
    "device_to_host",
    "peer_copy",
    "all_reduce_busbw",
)
# PCIe bandwidth per lane and direction, GB/s, after line coding (PCI-SIG: 2.5/5/8/16/32/64 GT/s;
# 8b/10b for gen 1-2, 128b/130b for gen 3-5, 242b/256b FLIT for gen 6).
PCIE_LANE_GBS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
Vendor = Literal["nvidia", "amd"]
VENDORS: dict[str, Vendor] = {"cuda": "nvidia", "rocm": "amd"}  # a lock's backend -> whose datasheet
Dtype = Literal["fp32", "tf32", "bf16", "fp16", "fp8"]
# The probe's dtype names (torch's) -> the catalog's.
DTYPES: dict[str, Dtype] = {
    "float32": "fp32",
    "tf32": "tf32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "float8_e4m3fn": "fp8",
}


@dataclass(frozen=True, kw_only=True)
class PerfThreshold(Row):
    figure: Figure
    fraction: float
    why: str
    # What the fraction is of: the card's datasheet, or what healthy cards achieve ([[achieved]] rows).
    basis: Literal["datasheet", "achieved"] = "datasheet"
    vendor: Vendor | None = None  # a fraction for one vendor's cards only; None: every card

    def __post_init__(self) -> None:
        super().__post_init__()
        at_least("fraction", self.fraction, 0.05)
        at_most("fraction", self.fraction, 1.0)
        if self.basis == "achieved" and self.figure != "matmul":
            fail("basis", "only matmul has [[achieved]] figures")


@dataclass(frozen=True, kw_only=True)
class PerfAchieved(Row):
    """What one healthy torch device of a card measured: a published or recorded matmul figure."""

    card: str
    dtype: Dtype
    tflops: float
    cite: str  # the source, short enough for a failure message
    why: str

    def __post_init__(self) -> None:
        super().__post_init__()
        at_least("tflops", self.tflops, 0.1)
        text("cite", self.cite)


@dataclass(frozen=True, kw_only=True)
class PerfCard(Row):
    id: str
    fp32_tflops: float | None = None
    tf32_tflops: float | None = None
    bf16_tflops: float | None = None
    fp16_tflops: float | None = None
    fp8_tflops: float | None = None
    memory_bandwidth_gbs: float | None = None
    pcie_gen: int | None = None
    pcie_lanes: int | None = None
    interconnect: str | None = None
    interconnect_gbs: float | None = None
    # Point-to-point links per GPU that interconnect_gbs adds up (Infinity Fabric: 7, a full mesh of 8);
    # 1 = a switch (NVSwitch) that gives one pair of GPUs the whole figure.
    interconnect_links: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.pcie_gen is not None and self.pcie_gen not in PCIE_LANE_GBS:
            fail("pcie_gen", f"{self.pcie_gen} is not a PCIe generation (1-6)")
        at_least("interconnect_links", self.interconnect_links, 1)

    def matmul_tflops(self, dtype: str) -> float | None:
        """The datasheet's dense figure for a probe dtype (``float32``, ``tf32``, ``bfloat16`` ...)."""
        key = DTYPES.get(dtype)
        value: float | None = None if key is None else getattr(self, f"{key}_tflops")
        return value

    def interconnect_for(self, gpus: int) -> float | None:
        """What one GPU's links carry when ``gpus`` GPUs talk: a pair (2) or an all-reduce over ``gpus``.
        A mesh uses ``gpus - 1`` of its links; a switch gives the whole figure."""
        if self.interconnect_gbs is None:
            return None
        if self.interconnect_links == 1:
            return self.interconnect_gbs
        per_link = self.interconnect_gbs / self.interconnect_links
        return round(per_link * min(self.interconnect_links, max(1, gpus - 1)), 1)

    @property
    def pcie_gbs(self) -> float | None:
        """The host link's bandwidth per direction (GB/s), from its generation and lanes."""
        if self.pcie_gen is None or self.pcie_lanes is None:
            return None
        return round(PCIE_LANE_GBS[self.pcie_gen] * self.pcie_lanes, 1)


@dataclass(frozen=True, kw_only=True)
class PerformanceFile:
    __pydantic_config__ = INPUT
    threshold: tuple[PerfThreshold, ...]
    card: tuple[PerfCard, ...]
    achieved: tuple[PerfAchieved, ...] = ()

    def fraction(
        self, figure: Figure, vendor: str | None = None, basis: str = "datasheet"
    ) -> PerfThreshold | None:
        """The row for ``figure`` on ``basis``: the vendor's own where it has one, else the one for every
        card."""
        rows = [t for t in self.threshold if t.figure == figure and t.basis == basis]
        own = next((t for t in rows if vendor is not None and t.vendor == vendor), None)
        return own or next((t for t in rows if t.vendor is None), None)

    def for_card(self, card_id: str) -> PerfCard | None:
        return next((c for c in self.card if c.id == card_id), None)

    def achieved_for(self, card_id: str, dtype: str) -> PerfAchieved | None:
        """What healthy ``card_id`` devices achieve in a probe dtype (``bfloat16`` ...), if recorded."""
        key = DTYPES.get(dtype)
        return next((a for a in self.achieved if a.card == card_id and a.dtype == key), None)


def load_performance(directory: Path | None = None) -> PerformanceFile:
    """``performance.toml`` of the catalog folder (the packaged data by default), validated; every card
    id must be a card or a lookalike of ``cards.toml``."""
    from envbuild.catalog import load_catalog
    from envbuild.catalog.loader import load_data_file
    from envbuild.errors import CatalogError
    from envbuild.resources import catalog_dir

    folder = directory or catalog_dir()
    data = load_data_file(folder / "performance.toml", PerformanceFile)
    catalog = load_catalog(directory)
    known = {card.id for card in catalog.cards} | {row.id for row in catalog.lookalikes}
    for i, row in enumerate(data.card):
        if row.id not in known:
            raise CatalogError(
                f"performance.toml: card[{i}]: {row.id!r} is not a card or a lookalike of cards.toml"
            )
    seen: set[tuple[str, str]] = set()
    for i, got in enumerate(data.achieved):
        card = data.for_card(got.card)
        sheet: float | None = None if card is None else getattr(card, f"{got.dtype}_tflops")
        problem = (
            f"{got.card!r} has no {got.dtype}_tflops [[card]] row"
            if sheet is None
            else f"{got.tflops:g} TFLOP/s is above the datasheet's {sheet:g}"
            if got.tflops > sheet
            else f"a second row for {got.card} {got.dtype}"
            if (got.card, got.dtype) in seen
            else None
        )
        if problem:
            raise CatalogError(f"performance.toml: achieved[{i}]: {problem}")
        seen.add((got.card, got.dtype))
    return data
