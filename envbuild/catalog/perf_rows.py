"""Rows of ``performance.toml``: each card's datasheet figures, and how close to them a healthy card gets.

The ``performance`` validate stage (:mod:`envbuild.validate.performance`) compares what it measures with
``fraction x datasheet``: the fraction is below the lowest figure published for healthy cards (each
``[[threshold]]`` row says which measurements it rests on), so a card under it is not merely unlucky.
Units: TFLOP/s dense (no sparsity), GB/s = 10^9 bytes per second, interconnect per GPU and direction.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from envbuild.boundary import INPUT
from envbuild.catalog.rows import Row, at_least, at_most, fail

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


@dataclass(frozen=True, kw_only=True)
class PerfThreshold(Row):
    figure: Figure
    fraction: float
    why: str

    def __post_init__(self) -> None:
        super().__post_init__()
        at_least("fraction", self.fraction, 0.05)
        at_most("fraction", self.fraction, 1.0)


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
        return {
            "float32": self.fp32_tflops,
            "tf32": self.tf32_tflops,
            "bfloat16": self.bf16_tflops,
            "float16": self.fp16_tflops,
            "float8_e4m3fn": self.fp8_tflops,
        }.get(dtype)

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

    def fraction(self, figure: Figure) -> PerfThreshold | None:
        return next((t for t in self.threshold if t.figure == figure), None)

    def for_card(self, card_id: str) -> PerfCard | None:
        return next((c for c in self.card if c.id == card_id), None)


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
    return data
