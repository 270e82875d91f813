"""The ``performance`` stage's decision: each measured figure against what healthy cards reach.

The probes (``probes/probe_performance.py`` in the warm torch worker, ``probes/probe_collectives.py``
one process per device) measure; this module compares, purely.  A figure fails when it is below
``fraction x reference`` (:mod:`envbuild.catalog.perf_rows`: the fraction sits below every published
figure of a healthy card, and names its sources).  The reference of a matmul is what healthy devices of
the card achieve in that dtype where the catalog records it, else the datasheet with the vendor's
fraction (the lock's backend: cuda = NVIDIA, rocm = AMD); every other figure's is the datasheet.  When
the lock orders several cards, each figure is held to the lowest of their expectations: a healthy card
of any of them passes.  tf32 on ROCm is not judged: torch does not use TF32 there by default.

What cannot be compared is reported, never passed in silence: the CPU (no datasheet row), a card or a
figure the catalog has no value for, a figure the time budget left unmeasured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from envbuild.catalog.perf_rows import VENDORS, Figure, PerfCard, PerformanceFile
from envbuild.models import Lock
from envbuild.report.model import StageResult
from envbuild.validate.decide import result

# What slows each figure on a rented machine, in the order worth checking.
CAUSES: dict[Figure, str] = {
    "matmul": "a power cap or low clocks (nvidia-smi -q -d POWER,PERFORMANCE: clock event reasons), "
    "thermal slowdown, another process on the device, or a MIG/partition slice of the card",
    "memory_copy": "memory clocks held low, memory errors (nvidia-smi -q -d ECC,ROW_REMAPPER), or "
    "another process using the device's memory bandwidth",
    "host_to_device": "a PCIe link narrowed or trained at a lower generation (nvidia-smi -q -d PCIE, "
    "lspci -vv LnkSta), a PCIe switch shared with other cards, or the process on the far NUMA node",
    "device_to_host": "a PCIe link narrowed or trained at a lower generation (nvidia-smi -q -d PCIE, "
    "lspci -vv LnkSta), a PCIe switch shared with other cards, or the process on the far NUMA node",
    "peer_copy": "an NVLink/Infinity Fabric link down (nvidia-smi nvlink -s), peer access disabled, or "
    "peer traffic routed through the host over PCIe",
    "all_reduce_busbw": "NVLink or the fabric manager down (nvidia-smi -q: Fabric), NCCL_P2P_DISABLE or "
    "NCCL_IB_DISABLE set, or a link shared with another job",
}
UNITS: dict[Figure, str] = {
    "matmul": "TFLOP/s",
    "memory_copy": "GB/s",
    "host_to_device": "GB/s",
    "device_to_host": "GB/s",
    "peer_copy": "GB/s",
    "all_reduce_busbw": "GB/s",
}


@dataclass(frozen=True)
class Judged:
    figure: Figure
    where: str  # "cuda:0 bfloat16", "cuda:0 -> cuda:1", "4 ranks"
    measured: float
    datasheet: float | None = None
    fraction: float | None = None
    card: str | None = None
    basis: str | None = None  # what the reference is, when not the card's datasheet
    achieved: float | None = None  # what healthy devices of the card reach: the reference, when set

    @property
    def reference(self) -> float | None:
        return self.achieved if self.achieved is not None else self.datasheet

    @property
    def expected(self) -> float | None:
        if self.reference is None or self.fraction is None:
            return None
        return round(self.reference * self.fraction, 2)

    @property
    def ok(self) -> bool | None:
        return None if self.expected is None else self.measured >= self.expected

    def row(self) -> dict[str, Any]:
        return {
            "figure": self.figure,
            "where": self.where,
            "measured": self.measured,
            "unit": UNITS[self.figure],
            "datasheet": self.datasheet,
            "achieved": self.achieved,
            "fraction": self.fraction,
            "expected_at_least": self.expected,
            "card": self.card,
            "basis": self.basis,
            "ok": self.ok,
        }

    def problem(self) -> str:
        assert self.reference is not None and self.fraction is not None
        unit = UNITS[self.figure]
        basis = self.basis or f"the {self.card} datasheet's {self.datasheet:g} {unit}"
        return (
            f"{self.figure.replace('_', ' ')} on {self.where}: {self.measured:g} {unit}, expected at least "
            f"{self.expected:g} {unit} ({self.fraction:.0%} of {basis})"
        )


def _lowest(
    rows: list[tuple[PerfCard, int]], value: Any, per_device: bool
) -> tuple[float | None, str | None]:
    """The lowest datasheet value among the ordered cards that have one, and that card's id.
    ``per_device``: a card torch sees as several devices (an MI250X is two GCDs) gives each its share."""
    found = [
        (round(v / (devices if per_device else 1), 2), row.id)
        for row, devices in rows
        if (v := value(row)) is not None
    ]
    if not found:
        return None, None
    return min(found)


def _matmul(
    rows: list[tuple[PerfCard, int]],
    data: PerformanceFile,
    vendor: str | None,
    where: str,
    dtype: str,
    tflops: float,
) -> Judged:
    """A matmul held to the lowest expectation among the ordered cards: ``fraction x achieved`` where the
    card and dtype have an achieved figure, else the vendor's ``fraction x datasheet``."""
    on_achieved = data.fraction("matmul", basis="achieved")
    on_datasheet = data.fraction("matmul", vendor)
    options: list[Judged] = []
    for row, devices in rows:
        value = row.matmul_tflops(dtype)
        sheet = None if value is None else round(value / devices, 2)
        got = data.achieved_for(row.id, dtype)
        if got is not None and on_achieved is not None:
            basis = f"the {row.id}'s achieved {got.tflops:g} TFLOP/s {got.dtype} ({got.cite})"
            options.append(
                Judged("matmul", where, tflops, sheet, on_achieved.fraction, row.id, basis, got.tflops)
            )
        elif sheet is not None and on_datasheet is not None:
            options.append(Judged("matmul", where, tflops, sheet, on_datasheet.fraction, row.id))
    return min(options, key=lambda j: j.expected or 0.0, default=Judged("matmul", where, tflops))


def judge(
    lock: Lock, figures: dict[str, Any], collectives: dict[str, Any] | None, data: PerformanceFile
) -> list[Judged]:
    """Every measured figure, with the datasheet value and fraction it is held to (None: not compared)."""
    gpu = lock.backend in ("cuda", "rocm")
    rows = [
        (row, t.devices_per_card) for t in lock.targets if gpu and (row := data.for_card(t.id)) is not None
    ]

    def held(figure: Figure, where: str, measured: float, value: Any) -> Judged:
        datasheet, card = _lowest(rows, value, per_device=figure in ("matmul", "memory_copy"))
        threshold = data.fraction(figure)
        fraction = threshold.fraction if threshold is not None and datasheet is not None else None
        return Judged(figure, where, measured, datasheet if fraction else None, fraction, card)

    vendor = VENDORS.get(lock.backend)
    out: list[Judged] = []
    for m in figures.get("matmul") or []:
        dtype = str(m.get("dtype"))
        if lock.backend == "rocm" and dtype == "tf32":
            continue  # torch on ROCm does not use TF32 by default: nothing to judge
        if isinstance(m.get("tflops"), (int, float)):
            out.append(_matmul(rows, data, vendor, f"{m.get('device')} {dtype}", dtype, float(m["tflops"])))
    for c in figures.get("memory_copy") or []:
        if isinstance(c.get("gbs"), (int, float)):
            out.append(
                held("memory_copy", str(c.get("device")), float(c["gbs"]), lambda r: r.memory_bandwidth_gbs)
            )
    for h in figures.get("host") or []:
        if isinstance(h.get("gbs"), (int, float)) and h.get("direction") in (
            "host_to_device",
            "device_to_host",
        ):
            out.append(held(h["direction"], str(h.get("device")), float(h["gbs"]), lambda r: r.pcie_gbs))
    for p in (figures.get("peer") or {}).get("pairs") or []:
        if isinstance(p.get("gbs"), (int, float)):
            where = f"cuda:{p.get('src')} -> cuda:{p.get('dst')}"
            out.append(held("peer_copy", where, float(p["gbs"]), lambda r: r.interconnect_for(2)))
    sizes = (collectives or {}).get("sizes") or []
    if sizes and gpu:
        best = max(float(s.get("busbw_gbs") or 0.0) for s in sizes)
        world = int((collectives or {}).get("world") or 2)
        out.append(held("all_reduce_busbw", f"{world} ranks", best, lambda r: r.interconnect_for(world)))
    elif sizes:
        best = max(float(s.get("busbw_gbs") or 0.0) for s in sizes)
        out.append(Judged("all_reduce_busbw", f"{(collectives or {}).get('world')} ranks (gloo)", best))
    return out


def decide_performance(
    lock: Lock, figures: dict[str, Any], collectives: dict[str, Any] | None, data: PerformanceFile
) -> StageResult:
    judged = judge(lock, figures, collectives, data)
    facts: dict[str, Any] = {
        "figures": [j.row() for j in judged],
        "budget_s": figures.get("budget_s"),
        "seconds": figures.get("seconds"),
        "torch_version": figures.get("torch_version"),
        "devices": figures.get("names"),
    }
    if collectives is not None:
        facts["collectives"] = collectives
    if figures.get("peer"):
        facts["peer_access"] = figures["peer"].get("access")
    warnings: list[str] = []
    unmeasured = figures.get("unmeasured") or []
    if unmeasured:
        listed = ", ".join(
            f"{u['figure']} {u.get('device', '')} {u.get('dtype', '')}".strip() for u in unmeasured
        )
        warnings.append(
            f"the time budget ({figures.get('budget_s')} s, --perf-budget) ran out before: {listed}"
        )
    for e in figures.get("errors") or []:
        warnings.append(
            f"{e.get('figure')} on {e.get('device')} {e.get('dtype', '')}: {e.get('error')}".strip()
        )
    for e in (collectives or {}).get("errors") or []:
        warnings.append(f"all-reduce: {e}")
    if collectives is not None and collectives.get("sizes") and not collectives.get("sums_ok"):
        return result(
            "performance",
            "all-reduce returned wrong sums: the ranks do not agree on the data",
            "report the machine to the provider (a faulty link or device)",
            **facts,
            warnings=warnings,
        )
    uncompared = sorted({j.figure for j in judged if j.ok is None})
    if uncompared:
        why = "the CPU has no datasheet row" if lock.backend == "cpu" else "no datasheet value in the catalog"
        facts["not_compared"] = {"figures": uncompared, "why": why}
    if not judged:
        return result(
            "performance", "the performance probe measured nothing", None, **facts, warnings=warnings
        )
    low = [j for j in judged if j.ok is False]
    if low:
        first = low[0]
        more = f" (and {len(low) - 1} more below their thresholds)" if len(low) > 1 else ""
        return result(
            "performance",
            first.problem() + more,
            f"likely causes: {CAUSES[first.figure]}",
            **facts,
            warnings=warnings,
        )
    return result("performance", **facts, warnings=warnings)


def judge_fleet(lock: Lock, sweep: dict[str, Any], data: PerformanceFile) -> Judged | None:
    """The all-reduce across lots (``--fleet``), held to ``resources.network_gbps`` when the profile
    declares it (Gbit/s, so /8 for GB/s) with the all-reduce fraction; the network is the provider's,
    no card's datasheet says what it carries.  None when nothing was measured."""
    sizes = sweep.get("sizes") or []
    if not sizes:
        return None
    best = max(float(s.get("busbw_gbs") or 0.0) for s in sizes)
    where = f"{sweep.get('world')} lots"
    threshold = data.fraction("all_reduce_busbw")
    if lock.network_gbps is None or threshold is None:
        return Judged("all_reduce_busbw", where, best)
    basis = f"resources.network_gbps = {lock.network_gbps:g} Gbit/s, {lock.network_gbps / 8:g} GB/s"
    return Judged("all_reduce_busbw", where, best, lock.network_gbps / 8, threshold.fraction, None, basis)
