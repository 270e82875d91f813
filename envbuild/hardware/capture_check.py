"""``envbuild check PROFILE --smi FILE``: judge captures of a machine before renting it.

The captures are read (:func:`envbuild.hardware.captures.read_capture`, which names a bad file and the
formats accepted), merged into one reading (:mod:`.merge`), and judged by the same rules as
``validate`` (:mod:`.rules`) against the plan's targets and resources.  A capture's NVIDIA driver wins
over ``--driver`` (W-HW-DRIVER when they differ), so the plan's driver floor (E-DRIVER-TOO-OLD) judges
the machine's own driver.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from envbuild.models import CheckResult, Finding
from envbuild.models.hardware import HardwareFacts

_ORDER = {"error": 0, "warning": 1, "info": 2}


@dataclass(frozen=True, kw_only=True)
class Captures:
    facts: HardwareFacts  # the captures merged
    readings: tuple[HardwareFacts, ...]
    driver: str | None  # the driver check plans for: the capture's, else --driver
    notes: tuple[Finding, ...] = ()


def read_captures(paths: Sequence[Path], driver: str | None) -> Captures:
    """The captures at ``paths`` as one reading, and the driver to plan for."""
    from envbuild.hardware.captures import read_capture
    from envbuild.hardware.merge import merge, sources

    readings = tuple(read_capture(Path(p)) for p in paths)
    facts = merge(readings)
    notes: list[Finding] = []
    if len({r.vendor for r in readings}) > 1:
        from envbuild.errors import CaptureError

        raise CaptureError(
            f"--smi: the captures are of NVIDIA and AMD cards, not one machine: {sources(readings)}"
        )
    seen = facts.driver_version if facts.vendor == "nvidia" else None
    if seen and driver and seen != driver:
        notes.append(
            Finding(
                severity="warning",
                code="W-HW-DRIVER",
                message=f"--driver {driver} differs from the driver {seen} in {sources(readings)}: the "
                "capture's driver is the machine's, and the plan is judged with it",
            )
        )
    return Captures(facts=facts, readings=readings, driver=seen or driver, notes=tuple(notes))


def with_hardware(result: CheckResult, captures: Captures) -> CheckResult:
    """``result`` with the hardware rules' findings over ``captures`` against the plan's order."""
    from envbuild.catalog import load_catalog
    from envbuild.hardware.rules import Order, judge

    catalog = load_catalog()
    plan = result.plan
    targets = tuple(c for t in plan.targets if t.vendor != "cpu" and (c := catalog.card(t.id)) is not None)
    res = plan.profile.resources
    order = Order(targets=targets, gpus=res.gpus, gpu_memory_gib=res.gpu_memory_gib)
    found = judge(captures.facts, order, catalog)
    merged = [*result.findings, *captures.notes, *(f for f in found if f not in result.findings)]
    return replace(result, findings=tuple(sorted(merged, key=lambda f: _ORDER[f.severity])))


def summary(captures: Captures) -> str:
    """``2 x NVIDIA H100 80GB HBM3, driver 550.54.15 (nvidia-smi -q -x (a.xml))``: the hardware row."""
    from collections import Counter

    from envbuild.hardware.merge import sources
    from envbuild.untrusted import terminal

    names = Counter(d.name or "unnamed" for d in captures.facts.devices)
    cards = ", ".join(f"{n} x {name}" for name, n in names.items()) or "no device"
    drv = f", driver {captures.facts.driver_version}" if captures.facts.driver_version else ""
    # for the terminal (check's "hardware" row): the capture's names and driver shown, never run
    return terminal(f"{cards}{drv} ({sources(captures.readings)})")
