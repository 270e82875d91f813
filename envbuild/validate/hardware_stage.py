"""The devices stage's hardware verdict (issue 26): the machine's live facts, judged by the rules of
``check --smi``.

The facts come from the vendor's own interfaces (:mod:`envbuild.hardware.live`: NVML through
nvidia-ml-py, else ``nvidia-smi -q -x``; ``amd-smi``, else ``rocm-smi``) and are judged
(:func:`envbuild.hardware.rules.judge_rules`) against the lock's targets, ``resources.gpus`` and the
declared memory per device, leaving out the validator's own processes.  An error fails the devices
stage (the finding is the error, its fix the hint); a warning joins the stage's ``warnings``; what went
unjudged is listed in its facts.  When no vendor tool answers, the stage says so: a warning for a lock
with torch (torch saw the devices), a failure for a lock without torch (nothing else saw them).

The whole reading (the facts, their source, each rule's verdict) becomes report.json's ``hardware``
section (:func:`HardwareJudgement.section`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from envbuild.boundary import to_data
from envbuild.report.model import StageResult
from envbuild.validate.decide import result
from envbuild.validate.proc_table import descendants

if TYPE_CHECKING:
    from collections.abc import Collection

    from envbuild.catalog import Catalog
    from envbuild.hardware.rules import Order
    from envbuild.models import Finding, Lock
    from envbuild.models.hardware import HardwareFacts

# What is asked, per backend, in order (envbuild.hardware.live).
TRIED = {
    "cuda": "NVML (nvidia-ml-py), nvidia-smi -q -x",
    "rocm": "amd-smi static --json + amd-smi metric --json, rocm-smi --json",
}
NO_TOOL_HINT = {
    "cuda": "start the container with `--gpus all` and NVIDIA_DRIVER_CAPABILITIES including `utility` "
    "(it mounts nvidia-smi and libnvidia-ml.so.1), or install nvidia-ml-py in envbuild's environment",
    "rocm": "install amd-smi or rocm-smi (ROCm's tools) where the validator runs",
}


def read_live(backend: str) -> HardwareFacts | None:
    """This machine's facts for ``backend`` ("cuda" or "rocm"), or None when no vendor tool answers."""
    from envbuild.hardware.live import amd_facts, nvidia_facts

    return nvidia_facts() if backend == "cuda" else amd_facts()


def order_of(lock: Lock, catalog: Catalog) -> Order:
    """What the lock ordered: its targets (catalog rows, in the lock's order), ``gpus``, the memory need."""
    from envbuild.hardware.rules import Order

    targets = tuple(c for t in lock.targets if (c := catalog.card(t.id)) is not None)
    return Order(targets=targets, gpus=lock.gpus, gpu_memory_gib=lock.gpu_memory_gib)


def own_pids() -> set[int]:
    """The validator and every process under it (the warm worker, the probes): their GPU memory is
    the run's own, not another tenant's."""
    me = os.getpid()
    return {me, *descendants(me)}


def split_fix(message: str) -> tuple[str, str | None]:
    """A rule's message is ``what is wrong: the fix`` (the fix after its last ``": "``)."""
    what, sep, fix = message.rpartition(": ")
    return (what, fix) if sep and what else (message, None)


@dataclass(frozen=True, kw_only=True)
class HardwareJudgement:
    backend: str
    facts: HardwareFacts | None
    findings: tuple[Finding, ...] = ()
    verdicts: tuple[dict[str, Any], ...] = ()

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[str]:
        if self.facts is None:
            return [f"hardware not judged: no vendor tool answered ({TRIED[self.backend]})"]
        return [f"{f.code}: {f.message}" for f in self.findings if f.severity == "warning"]

    @property
    def unjudged(self) -> list[str]:
        if self.facts is None:
            return [f"every rule: no vendor tool answered ({TRIED[self.backend]})"]
        return [why for v in self.verdicts for why in v["why"]]

    def section(self) -> dict[str, Any]:
        """report.json's ``hardware``: the source, the facts read, each rule's verdict, the findings."""
        return {
            "source": self.facts.source if self.facts else None,
            "tried": TRIED[self.backend],
            "facts": to_data(self.facts) if self.facts else None,
            "verdicts": list(self.verdicts),
            "findings": [to_data(f) for f in self.findings],
            "unjudged": self.unjudged,
        }


def judge_live(
    lock: Lock,
    facts: HardwareFacts | None,
    *,
    pids: Collection[int] = (),
    in_container: bool | None = None,
) -> HardwareJudgement:
    """The rules over ``facts`` (None: no tool answered) against what ``lock`` ordered."""
    from envbuild.catalog import load_catalog
    from envbuild.hardware.rules import judge_rules

    if facts is None:
        return HardwareJudgement(backend=lock.backend, facts=None)
    if facts.in_container is None and in_container is not None:
        facts = replace(facts, in_container=in_container)
    catalog = load_catalog()
    judged = judge_rules(facts, order_of(lock, catalog), catalog, own_pids=pids)
    return HardwareJudgement(
        backend=lock.backend,
        facts=facts,
        findings=judged.findings,
        verdicts=tuple(to_data(v) for v in judged.verdicts),
    )


def _facts(hw: HardwareJudgement) -> dict[str, Any]:
    errors = [f"{f.code}: {f.message}" for f in hw.errors]
    return {
        "hardware_source": hw.facts.source if hw.facts else None,
        "hardware_unjudged": hw.unjudged,
        **({"hardware_errors": errors} if errors else {}),
    }


def with_hardware(res: StageResult, hw: HardwareJudgement) -> StageResult:
    """The devices stage's result with the hardware verdict: the first hardware error fails a stage that
    passed (its fix the hint); warnings join ``warnings`` (a passed stage's hint, as other stages do)."""
    warnings = [*(res.facts.get("warnings") or []), *hw.warnings]
    facts = {**res.facts, **_facts(hw), "warnings": warnings}
    if res.status == "passed" and hw.errors:
        first = hw.errors[0]
        what, fix = split_fix(first.message)
        more = len(hw.errors) - 1
        error = f"{first.code}: {what}" + (
            f" (and {more} more hardware error(s): see hardware)" if more else ""
        )
        return replace(res, status="failed", error=error, hint=fix, facts=facts)
    if res.status == "passed" and warnings and not res.hint:
        return replace(res, facts=facts, hint="; ".join(warnings))
    return replace(res, facts=facts)


def hardware_only(lock: Lock, hw: HardwareJudgement) -> StageResult:
    """The devices stage of a GPU lock without torch: the vendor tools are the only witnesses."""
    facts: dict[str, Any] = {"torch": None}
    if hw.facts is None:
        return result(
            "devices",
            f"no vendor tool answered ({TRIED[lock.backend]}): the hardware cannot be judged",
            NO_TOOL_HINT[lock.backend],
            **facts,
            **_facts(hw),
        )
    facts["count"] = len(hw.facts.devices)
    facts["devices"] = [
        {
            "index": d.index,
            "name": d.name,
            "arch": d.arch,
            "memory_gib": round(d.memory_total_mib / 1024, 2) if d.memory_total_mib else None,
            "uuid": d.uuid,
        }
        for d in hw.facts.devices
    ]
    return with_hardware(result("devices", **facts), hw)
