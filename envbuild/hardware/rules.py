"""One set of rules over :class:`~envbuild.models.hardware.HardwareFacts`, run by ``validate`` (a live
reading) and ``check PROFILE --smi FILE`` (captures): is the card the one ordered, whole, healthy and
free?  Each rule is one function adding findings with their fix; a rule whose facts the source does
not report adds to the unjudged list instead of passing (I-HW-UNJUDGED says which, and why).

The fit rules (identity, count, memory) live in :mod:`envbuild.hardware.fit`; this module holds the
health rules and :func:`judge`, which runs them all.  The driver floor stays the plan's rule
(E-DRIVER-TOO-OLD): ``check --smi`` gives it the capture's driver.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from envbuild.hardware import fit, interconnect
from envbuild.hardware.judge import IDLE_PCT, LOADED_PCT, Judge, Order, gib, label, load
from envbuild.models import Finding
from envbuild.models.hardware import NOT_APPLICABLE

if TYPE_CHECKING:
    from pathlib import Path

    from envbuild.catalog import Catalog
    from envbuild.models.hardware import HardwareFacts

__all__ = ["IDLE_PCT", "LOADED_PCT", "Judged", "Order", "RuleVerdict", "judge", "judge_rules", "rules"]

# Correctable (single-bit) ECC errors since the driver loaded above this are a warning.  Source: Meta's
# GPU cluster monitoring health checks (facebookresearch/gcm, check-nvidia-smi
# ecc_corrected_volatile_total, default --ecc_corrected_volatile_threshold 50000000).
CORRECTABLE_THRESHOLD = 50_000_000
CORRECTABLE_SOURCE = (
    "facebookresearch/gcm health check ecc_corrected_volatile_total: default threshold 50,000,000 "
    "volatile corrected errors (https://facebookresearch.github.io/gcm/docs/GCM_Health_Checks/"
    "health_checks/check-nvidia-smi/ecc_corrected_volatile_total)"
)

SLOWDOWNS = {
    "hw_slowdown": "HW slowdown",
    "hw_thermal_slowdown": "HW thermal slowdown",
    "sw_thermal_slowdown": "SW thermal slowdown",
    "hw_power_brake_slowdown": "HW power brake",
}
# Under load, boost clocks come down for power and heat, but not to half: a data-centre card's base clock,
# which NVIDIA guarantees under full load, is 0.78-0.80 of its maximum (A100 SXM 1095/1410, H100 SXM
# 1590/1980 MHz, NVIDIA's datasheets).  Below half the maximum is throttling, reported or not.
SM_CLOCK_FLOOR = 0.5
# MI300X compute partitions: how many devices one card becomes (AMD Instinct MI300X partitioning docs).
AMD_PARTITIONS = {"SPX": 1, "DPX": 2, "TPX": 3, "QPX": 4, "CPX": 8}


# ---- partitioning ---------------------------------------------------------------------------------


def partitioning(j: Judge) -> None:
    """MIG (NVIDIA) or an MI300X compute/memory partition mode that splits the card: an error."""
    for dev in j.facts.devices:
        size = f"{gib(dev.memory_total_mib)}" if dev.memory_total_mib else "its memory"
        if dev.mig_mode == "Enabled":
            n = dev.mig_devices
            each = (
                f"its {n} MIG instance(s) share the {size} "
                f"(about {gib(dev.memory_total_mib / n)} or less each)"
                if n and dev.memory_total_mib
                else "no MIG instance is created, so CUDA sees no usable device"
                if n == 0
                else f"each MIG instance holds a slice of the {size}"
            )
            j.out.error(
                "E-HW-MIG",
                f"{label(dev)}: MIG is enabled; {each}, not the whole card: ask the provider to disable MIG "
                f"(`sudo nvidia-smi -i {dev.index} -mig 0`, then a GPU reset) or to rent the card whole",
            )
        elif dev.mig_mode is None and j.facts.vendor == "nvidia":
            j.skip("partitioning", f"MIG mode not reported by {j.facts.source}")
        parts = AMD_PARTITIONS.get((dev.compute_partition or "").upper(), 1)
        nps = (dev.memory_partition or "").upper()
        if parts > 1 or (nps.startswith("NPS") and nps != "NPS1"):
            mode = "/".join(m for m in (dev.compute_partition, dev.memory_partition) if m)
            per = f" of {gib(dev.memory_total_mib)} each" if dev.memory_total_mib else ""
            j.out.error(
                "E-HW-MIG",
                f"{label(dev)}: partition mode {mode} splits the card into {parts} device(s){per}: ask the "
                f"provider for SPX/NPS1 (`sudo amd-smi set --gpu {dev.index} --compute-partition SPX` and "
                "`--memory-partition NPS1`, then reload the driver)",
            )
        elif j.facts.vendor == "amd" and dev.compute_partition is None:
            j.skip("partitioning", f"compute partition not reported by {j.facts.source}")


# ---- ECC ------------------------------------------------------------------------------------------


def ecc(j: Judge) -> None:
    """Uncorrectable errors, pending retirement, pending or failed remap: an error.  Correctable errors
    since the driver loaded above :data:`CORRECTABLE_THRESHOLD`: a warning."""
    for dev in j.facts.devices:
        e = dev.ecc
        if e.mode_current == NOT_APPLICABLE or e.mode_current == "Disabled":
            continue
        counts = (e.volatile_uncorrectable, e.aggregate_uncorrectable, e.remap_pending, e.remap_failure)
        if all(c is None for c in (*counts, e.retired_pages_pending)):
            j.skip("ECC", f"ECC counts not reported by {j.facts.source}")
            continue
        bad = []
        if e.volatile_uncorrectable:
            bad.append(f"{e.volatile_uncorrectable} uncorrectable error(s) since the driver loaded")
        if e.aggregate_uncorrectable:
            bad.append(f"{e.aggregate_uncorrectable} uncorrectable error(s) over the card's life")
        if e.retired_pages_pending:
            bad.append("a page retirement is pending")
        if e.remap_pending:
            bad.append("a row remap is pending")
        if e.remap_failure:
            bad.append("a row remap failed")
        if bad:
            fix = (
                "ask the provider for another card (a failed remap means the card is out of spare rows)"
                if e.remap_failure
                else "ask the provider to reset the GPU (pending retirement and remaps take effect then) or "
                "for another card"
            )
            j.out.error("E-HW-ECC", f"{label(dev)}: {'; '.join(bad)}: {fix}")
        if e.volatile_correctable is not None and e.volatile_correctable > CORRECTABLE_THRESHOLD:
            j.out.warning(
                "W-HW-ECC-CORRECTABLE",
                f"{label(dev)}: {e.volatile_correctable:,} correctable ECC errors since the driver loaded "
                f"(more than {CORRECTABLE_THRESHOLD:,}): the memory may be failing; ask for another card",
                source=CORRECTABLE_SOURCE,
            )


# ---- PCIe -----------------------------------------------------------------------------------------


def pcie(j: Judge) -> None:
    """Width below the maximum: a warning.  Generation below the maximum: a warning under load only;
    at idle it is power saving, and unjudged."""
    for dev in j.facts.devices:
        p = dev.pcie
        if p.width_current is None or p.width_max is None:
            j.skip("PCIe width", f"not reported by {j.facts.source}")
        elif p.width_current < p.width_max:
            j.out.warning(
                "W-HW-PCIE-WIDTH",
                f"{label(dev)}: PCIe link runs x{p.width_current} of x{p.width_max}: host-device copies get "
                f"{p.width_current}/{p.width_max} of the bandwidth; ask the provider to reseat the card or "
                "move it to a full-width slot",
            )
        if p.gen_current is None or p.gen_max is None:
            j.skip("PCIe generation", f"not reported by {j.facts.source}")
        elif p.gen_current < p.gen_max:
            if load(dev) == "loaded":
                j.out.warning(
                    "W-HW-PCIE-GEN",
                    f"{label(dev)}: PCIe gen {p.gen_current} of {p.gen_max} under load "
                    f"({dev.utilization_gpu_pct:g}% busy): ask the provider to check the slot and BIOS link "
                    "settings",
                )
            else:
                j.skip(
                    "PCIe generation",
                    f"{label(dev)} runs gen {p.gen_current} of {p.gen_max} while not under load (normal "
                    "power saving); judged only under load",
                )


# ---- clocks and power -----------------------------------------------------------------------------


def clocks(j: Judge) -> None:
    """HW slowdown, thermal slowdown or power brake: an error under load, a warning otherwise.  Under load,
    an SM clock below :data:`SM_CLOCK_FLOOR` of its maximum is an error too, whatever reasons the source
    reports (a GeForce card or a VM may report none)."""
    for dev in j.facts.devices:
        state = load(dev)
        sm, top = dev.sm_clock_mhz, dev.sm_clock_max_mhz
        clock = f" (SM clock {sm:g} of {top:g} MHz)" if sm is not None and top else ""
        fix = "ask the provider to check the cooling and the power supply, or for another machine"
        if dev.clock_event_reasons is None:
            j.skip("clocks", f"clock event reasons not reported by {j.facts.source}")
            active: list[str] = []
        else:
            active = [SLOWDOWNS[r] for r in dev.clock_event_reasons if r in SLOWDOWNS]
        if active:
            msg = f"{label(dev)}: {', '.join(active)} active{clock}"
            if state == "loaded":
                j.out.error("E-HW-CLOCKS", f"{msg} under load: the card runs below its clocks; {fix}")
            else:
                j.out.warning(
                    "W-HW-CLOCKS",
                    f"{msg} while {'idle' if state == 'idle' else 'not under load'}: it will hold back a "
                    f"job; {fix}",
                )
        elif state == "loaded" and sm is not None and top and sm < SM_CLOCK_FLOOR * top:
            j.out.error(
                "E-HW-CLOCKS",
                f"{label(dev)}: SM clock {sm:g} of {top:g} MHz ({sm / top:.0%}) under load "
                f"({dev.utilization_gpu_pct:g}% busy), with no slowdown reason reported: the card runs "
                f"below half its clocks; {fix}",
            )


def power(j: Judge) -> None:
    """A power limit below the card's default: a warning with both figures."""
    for dev in j.facts.devices:
        cur, default = dev.power_limit_w, dev.default_power_limit_w
        if cur is None or default is None:
            j.skip("power limit", f"not reported by {j.facts.source}")
        elif cur < default - 0.5:
            j.out.warning(
                "W-HW-POWER-LIMIT",
                f"{label(dev)}: power limit {cur:g} W is below the default {default:g} W: the card slows "
                "under load; ask the provider to restore it "
                f"(`sudo nvidia-smi -i {dev.index} -pl {default:g}`)",
            )


# ---- processes, compute mode (NVLink, fabric: envbuild.hardware.interconnect) -------------------------


def processes(j: Judge) -> None:
    """Other processes holding memory: a warning with the memory they hold.  In a container the other
    containers' processes are invisible, so memory in use beyond one runtime context counts too."""
    reserve = j.catalog.reserve(j.facts.vendor)
    context_mib = (reserve.gib if reserve else 1.0) * 1024
    for dev in j.facts.devices:
        if dev.processes is None:
            j.skip("processes", f"not reported by {j.facts.source}")
        others = [p for p in dev.processes or () if p.pid is None or p.pid not in j.own_pids]
        if others:
            held = sum(p.used_memory_mib or 0 for p in others)
            who = ", ".join(
                f"{p.name or 'pid ' + str(p.pid)} ({gib(p.used_memory_mib) if p.used_memory_mib else '?'})"
                for p in others[:5]
            )
            j.out.warning(
                "W-HW-PROCESSES",
                f"{label(dev)}: {len(others)} other process(es) hold {gib(held)}: {who}; the job gets what "
                "they leave: ask the provider for a card nobody else uses",
            )
        elif (
            j.facts.in_container is not False
            and dev.memory_used_mib is not None
            and dev.memory_used_mib > context_mib
        ):
            where = "inside a container" if j.facts.in_container else "with no process listed"
            j.out.warning(
                "W-HW-MEMORY-IN-USE",
                f"{label(dev)}: {gib(dev.memory_used_mib)} of memory in use {where}, more than one "
                f"runtime context ({context_mib / 1024:g} GiB): processes invisible here (another "
                "container) may hold it; ask the provider whether the card is shared",
                source=reserve.cite if reserve else None,
            )


def compute_mode(j: Judge) -> None:
    """Exclusive_Process or Prohibited: a warning (one process only, or none)."""
    for dev in j.facts.devices:
        mode = dev.compute_mode
        if mode is None:
            if j.facts.vendor == "nvidia":
                j.skip("compute mode", f"not reported by {j.facts.source}")
        elif mode.replace(" ", "_").lower() in ("exclusive_process", "exclusive_thread", "prohibited"):
            what = "no process may use it" if mode.lower() == "prohibited" else "only one process may use it"
            j.out.warning(
                "W-HW-COMPUTE-MODE",
                f"{label(dev)}: compute mode {mode}: {what} (a second worker or a DataLoader that touches "
                f"CUDA fails); ask the provider for Default (`sudo nvidia-smi -i {dev.index} -c DEFAULT`)",
            )


Rule = Callable[[Judge], None]


def rules() -> tuple[Rule, ...]:
    return (
        fit.identity,
        fit.count,
        fit.lots,
        fit.memory,
        partitioning,
        ecc,
        pcie,
        clocks,
        power,
        processes,
        compute_mode,
        interconnect.nvlink,
        interconnect.fabric,
    )


@dataclass(frozen=True, kw_only=True)
class RuleVerdict:
    """One rule's verdict over a reading: ``error`` / ``warning`` (its worst finding), ``unjudged`` (the
    source lacks a fact it needs, ``why`` says which), or ``passed``."""

    rule: str  # the rule's name: "identity", "ecc", "pcie", ...
    verdict: Literal["passed", "error", "warning", "unjudged"]
    codes: tuple[str, ...] = ()
    why: tuple[str, ...] = ()  # what went unjudged, and why


@dataclass(frozen=True, kw_only=True)
class Judged:
    findings: tuple[Finding, ...]  # errors first; I-HW-UNJUDGED last when something went unjudged
    verdicts: tuple[RuleVerdict, ...]  # one per rule, in :func:`rules` order


def judge_rules(
    facts: HardwareFacts,
    order: Order,
    catalog: Catalog,
    *,
    own_pids: Collection[int] = (),
    pci_ids: Path | None = None,
) -> Judged:
    """Every rule over ``facts``, with each rule's verdict; one I-HW-UNJUDGED lists what the source
    could not judge."""
    from envbuild.findings import Findings

    out = Findings()
    j = Judge(facts=facts, order=order, catalog=catalog, out=out, own_pids=own_pids, pci_ids=pci_ids)
    verdicts = []
    for rule in rules():
        seen = set(out.result())
        before = {k: list(v) for k, v in j.unjudged.items()}
        rule(j)
        new = [f for f in out.result() if f not in seen]
        why = tuple(
            f"{name}: {reason}"
            for name, reasons in j.unjudged.items()
            for reason in reasons
            if reason not in before.get(name, ())
        )
        severities = {f.severity for f in new}
        verdict: Literal["passed", "error", "warning", "unjudged"] = (
            "error"
            if "error" in severities
            else "warning"
            if "warning" in severities
            else "unjudged"
            if why
            else "passed"
        )
        verdicts.append(
            RuleVerdict(rule=rule.__name__, verdict=verdict, codes=tuple(f.code for f in new), why=why)
        )
    if j.unjudged:
        parts = [f"{rule} ({'; '.join(why)})" for rule, why in j.unjudged.items()]
        out.info("I-HW-UNJUDGED", f"not judged: {', '.join(parts)}")
    return Judged(findings=out.result(), verdicts=tuple(verdicts))


def judge(
    facts: HardwareFacts,
    order: Order,
    catalog: Catalog,
    *,
    own_pids: Collection[int] = (),
    pci_ids: Path | None = None,
) -> tuple[Finding, ...]:
    """Every rule over ``facts`` (:func:`judge_rules`), the findings only."""
    return judge_rules(facts, order, catalog, own_pids=own_pids, pci_ids=pci_ids).findings
