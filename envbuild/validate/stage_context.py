"""What the stages of one run share (:class:`StageContext`), and running a probe for a stage."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envbuild.models import Lock
from envbuild.report.model import StageResult, Status
from envbuild.validate import interp
from envbuild.validate.host import GpuToolFacts, collect_gpu_tools
from envbuild.validate.probe import ProbeResult, run_probe
from envbuild.validate.rendezvous import FleetSpec
from envbuild.validate.stages import PERF_BUDGET_S, SPECS
from envbuild.validate.worker import TorchWorker


@dataclass
class StageContext:
    lock: Lock
    python: str
    workdir: Path
    timeouts: dict[str, float] = field(default_factory=dict)
    python_chosen_by: str = interp.SOURCE_LOCK
    # FACTS established (True) or known missing (False, with the reason) by the stages run so far.
    facts: dict[str, tuple[bool, str]] = field(default_factory=dict)
    raw: dict[str, str] = field(default_factory=dict)  # raw-facts files for the report
    tools: GpuToolFacts | None = None
    device_count: int = 0
    restricted: bool = False
    worker: TorchWorker | None = None  # the warm probe worker (torch imported once per run)
    resume_worker: TorchWorker | None = None  # a second, fresh process for the checkpoint's resume
    use_worker: bool = True
    strict: bool = False  # --strict: a stage's warnings fail it
    interrupted_at: float | None = None  # time.monotonic() of the signal that stopped the run
    cancel: dict[str, threading.Event] = field(default_factory=dict)  # background stages
    files: dict[str, bytes] = field(default_factory=dict)  # binary report files (the Blender renders)
    skip: dict[str, str] = field(default_factory=dict)  # stage -> why --skip leaves it out (skip_reasons)
    hardware: dict[str, Any] | None = None  # report.json's hardware section (the devices stage)
    perf_budget_s: float = PERF_BUDGET_S  # --perf-budget: the performance stage's time budget
    fleet: FleetSpec | None = None  # --fleet: this lot's place in a group of lots (validate/rendezvous.py)

    def timeout(self, stage: str) -> float:
        return float(self.timeouts.get(stage, SPECS[stage].timeout_s))

    def gpu_tools(self) -> GpuToolFacts:
        if self.tools is None:
            self.tools = collect_gpu_tools()
            self.raw.update(self.tools.raw)
        return self.tools

    def device_names(self) -> list[str]:
        """The devices a torch probe works on: ``cuda:N`` for each GPU torch sees (ROCm too), or the CPU."""
        return [f"cuda:{i}" for i in range(self.device_count)] if self.gpu else ["cpu"]

    @property
    def gpu(self) -> bool:
        return self.lock.backend in ("cuda", "rocm")


class ProbeFailed(Exception):
    def __init__(self, res: StageResult) -> None:
        super().__init__(res.error)
        self.result = res


def probe(
    ctx: StageContext,
    stage: str,
    name: str,
    args: dict[str, Any],
    *,
    cwd: Path | None = None,
    warm: bool = False,
) -> dict[str, Any]:
    """Run a probe (in the warm worker when ``warm``); raise :class:`ProbeFailed` when it misbehaves."""
    if warm and ctx.use_worker:
        if ctx.worker is None:
            ctx.worker = TorchWorker(ctx.python)
        out = ctx.worker.call(name, args, ctx.timeout(stage), cwd=cwd)
    else:
        out = run_probe(ctx.python, name, args, ctx.timeout(stage), cwd=cwd)
    return probe_data(ctx, stage, name, out)


def probe_data(ctx: StageContext, stage: str, name: str, out: ProbeResult) -> dict[str, Any]:
    """A probe's data, or :class:`ProbeFailed` with the stage's result when it misbehaved."""
    if out.outcome == "ok":
        return out.data
    facts = {
        "probe": name,
        "returncode": out.returncode,
        "stderr_tail": out.stderr_tail[-800:],
        **out.facts,
    }
    status: Status = "timed_out" if out.outcome == "timed_out" else "failed"
    hint = {
        "timed_out": f"raise the limit with --timeout {stage}=SECONDS if the machine is just slow",
        "crashed": "a native crash in torch or a driver library: see stderr_tail",
        "garbage": "something printed over the probe's output (sitecustomize, a wrapper script?)",
        "error": "check --python / the lock's python_executable",
    }.get(out.outcome)
    raise ProbeFailed(StageResult(stage=stage, status=status, facts=facts, error=out.reason, hint=hint))
