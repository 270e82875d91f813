"""The hardware under load (issue 28 item 6): readings taken while the performance stage works the devices.

At idle a card may clock down and train its PCIe link at a lower generation to save power: the devices
stage cannot tell that from a fault, and leaves those rules unjudged.  While the performance probe keeps
the devices busy, :class:`Sampler` reads the live facts (NVML, else ``nvidia-smi -q -x``; ``amd-smi``,
else ``rocm-smi``: :func:`envbuild.validate.hardware_stage.read_live`) once a second in a thread.  The
busiest reading is judged by the rules whose verdict depends on load (:data:`LOAD_CODES`: an active HW,
thermal or power-brake slowdown under load is an error; a link below its generation under load a
warning), with the same rules as ``check --smi`` and the devices stage.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from envbuild.models import Finding, Lock
from envbuild.models.hardware import HardwareFacts

# The findings of the rules that judge a device by its load (envbuild/hardware/rules.py).
LOAD_CODES = frozenset({"E-HW-CLOCKS", "W-HW-CLOCKS", "W-HW-PCIE-GEN"})
INTERVAL_S = 1.0


@dataclass
class Sampler:
    """Live readings every ``interval_s`` while the ``with`` block runs (the first one at once)."""

    read: Callable[[], HardwareFacts | None]
    interval_s: float = INTERVAL_S
    samples: list[HardwareFacts] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _run(self) -> None:
        while True:
            try:
                facts = self.read()
            except Exception as exc:  # a tool that fails mid-run: noted, the stage goes on
                self.errors.append(f"{type(exc).__name__}: {exc}")
                facts = None
            if facts is not None:
                self.samples.append(facts)
            if self._stop.wait(self.interval_s):
                return

    def __enter__(self) -> Sampler:
        self._thread = threading.Thread(target=self._run, name="envbuild-load-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)


def busiest(samples: list[HardwareFacts]) -> HardwareFacts | None:
    """The reading whose least busy device is the busiest (every device loaded, if any reading has it)."""

    def least(facts: HardwareFacts) -> float:
        utils = [d.utilization_gpu_pct for d in facts.devices if d.utilization_gpu_pct is not None]
        return min(utils) if utils and len(utils) == len(facts.devices) else -1.0

    return max(samples, key=least, default=None)


@dataclass(frozen=True)
class UnderLoad:
    findings: tuple[Finding, ...]
    facts: dict[str, Any]


def judge_under_load(lock: Lock, samples: list[HardwareFacts], errors: list[str]) -> UnderLoad:
    """The load rules over the busiest reading, with a summary of every reading per device."""
    from envbuild.validate.hardware_stage import judge_live

    reading = busiest(samples)
    summary: dict[str, Any] = {"samples": len(samples), "interval_s": INTERVAL_S}
    if errors:
        summary["errors"] = errors[:5]
    if reading is None:
        summary["judged"] = False
        return UnderLoad((), summary)
    judged = judge_live(lock, reading)
    findings = tuple(f for f in judged.findings if f.code in LOAD_CODES)
    per_device: list[dict[str, Any]] = []
    for index, dev in enumerate(reading.devices):
        seen = [s.devices[index] for s in samples if index < len(s.devices)]
        utils = [d.utilization_gpu_pct for d in seen if d.utilization_gpu_pct is not None]
        gens = [d.pcie.gen_current for d in seen if d.pcie.gen_current is not None]
        reasons = sorted({r for d in seen for r in d.clock_event_reasons or ()})
        per_device.append(
            {
                "device": dev.index,
                "name": dev.name,
                "utilization_max_pct": max(utils, default=None),
                "pcie_gen_min": min(gens, default=None),
                "pcie_gen_max": dev.pcie.gen_max,
                "clock_event_reasons_seen": reasons,
                "power_limit_w": dev.power_limit_w,
            }
        )
    summary.update(judged=True, source=reading.source, devices=per_device)
    return UnderLoad(findings, summary)
