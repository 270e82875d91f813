"""The stage list, its dependency graph, and the runner.

Each stage gathers facts (a probe in the interpreter under test, or the vendor tools) and hands them
to a pure decision function.  A stage whose prerequisite did not pass is ``aborted`` and says why;
without ``keep_going`` the first failure aborts every later stage.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envbuild.errors import UsageError, choices
from envbuild.models import Lock
from envbuild.validate import checks, decide, decide_work, gpu
from envbuild.validate.host import GpuToolFacts, collect_gpu_tools, mem_available_bytes
from envbuild.validate.model import StageResult
from envbuild.validate.probe import run_probe


@dataclass(frozen=True)
class StageSpec:
    name: str
    needs: tuple[str, ...]
    timeout_s: float
    what: str


STAGES: tuple[StageSpec, ...] = (
    StageSpec("interpreter", (), 60, "the interpreter and venv actually used"),
    StageSpec("os", (), 60, "distribution, version, glibc"),
    StageSpec("packages", ("interpreter",), 120, "installed distributions vs the lock, broken requirements"),
    StageSpec("accelerator", ("packages",), 180, "torch build variant, GPU visibility, driver"),
    StageSpec("devices", ("accelerator",), 180, "every device: name, memory, arch coverage, smi agreement"),
    StageSpec("compute", ("devices",), 300, "matmul on each device vs a float64 reference"),
    StageSpec("extensions", ("compute",), 1200, "compile and run custom ops, extension smoke tests"),
    StageSpec("memory", ("devices",), 300, "allocate the declared need on each device"),
    StageSpec("checkpoint", ("compute",), 300, "save, resume in a fresh process, compare"),
    StageSpec("checks", ("packages",), 0, "the profile's own checks (each has its own timeout)"),
)
STAGE_NAMES: tuple[str, ...] = tuple(s.name for s in STAGES)
_SPECS = {s.name: s for s in STAGES}


def select_stages(names: Iterable[str] | None) -> list[str]:
    """The requested stages plus their prerequisites, in dependency order."""
    if names is None:
        return list(STAGE_NAMES)
    wanted: set[str] = set()
    pending = [n.strip() for n in names if n.strip()]
    if not pending:
        raise UsageError(f"--stages: no stage named (valid: {choices(STAGE_NAMES)})")
    for name in pending:
        if name not in _SPECS:
            raise UsageError(f"--stages: unknown stage {name!r} (valid: {choices(STAGE_NAMES)})")
    while pending:
        name = pending.pop()
        if name not in wanted:
            wanted.add(name)
            pending.extend(_SPECS[name].needs)
    return [n for n in STAGE_NAMES if n in wanted]


class Interrupted(Exception):
    def __init__(self, signame: str) -> None:
        super().__init__(signame)
        self.signame = signame


@dataclass
class Context:
    lock: Lock
    python: str
    workdir: Path
    timeouts: dict[str, float] = field(default_factory=dict)
    raw: dict[str, str] = field(default_factory=dict)  # raw-facts files for the report
    tools: GpuToolFacts | None = None
    device_count: int = 0
    restricted: bool = False

    def timeout(self, stage: str) -> float:
        return float(self.timeouts.get(stage, _SPECS[stage].timeout_s))

    def gpu_tools(self) -> GpuToolFacts:
        if self.tools is None:
            self.tools = collect_gpu_tools()
            self.raw.update(self.tools.raw)
        return self.tools

    @property
    def gpu(self) -> bool:
        return self.lock.backend in ("cuda", "rocm")


class ProbeFailed(Exception):
    def __init__(self, res: StageResult) -> None:
        super().__init__(res.error)
        self.result = res


def probe(
    ctx: Context, stage: str, name: str, args: dict[str, Any], *, cwd: Path | None = None
) -> dict[str, Any]:
    """Run a probe; raise :class:`ProbeFailed` with the stage's result when it misbehaves."""
    out = run_probe(ctx.python, name, args, ctx.timeout(stage), cwd=cwd)
    if out.outcome == "ok":
        return out.data
    facts = {"probe": name, "returncode": out.returncode, "stderr_tail": out.stderr_tail[-800:]}
    status = "timed_out" if out.outcome == "timed_out" else "failed"
    hint = {
        "timed_out": f"raise the limit with --timeout {stage}=SECONDS if the machine is just slow",
        "crashed": "a native crash in torch or a driver library: see stderr_tail",
        "garbage": "something printed over the probe's output (sitecustomize, a wrapper script?)",
        "error": "check --python / the lock's python_executable",
    }.get(out.outcome)
    raise ProbeFailed(StageResult(stage=stage, status=status, facts=facts, error=out.reason, hint=hint))


def _interpreter(ctx: Context) -> StageResult:
    return decide.decide_interpreter(ctx.lock, probe(ctx, "interpreter", "interpreter", {}))


def _os(ctx: Context) -> StageResult:
    data = probe(ctx, "os", "os", {})
    if data.get("os_release"):
        ctx.raw["os-release"] = str(data["os_release"])
    return decide.decide_os(ctx.lock, data)


def _packages(ctx: Context) -> StageResult:
    data = probe(ctx, "packages", "packages", {})
    names, installed = data.get("names", {}), data.get("installed", {})
    ctx.raw["pip-freeze.txt"] = "".join(f"{names.get(k, k)}=={v}\n" for k, v in sorted(installed.items()))
    return decide.decide_packages(ctx.lock, data)


TORCH_STAGES = frozenset({"devices", "compute", "extensions", "memory", "checkpoint"})


def _accelerator(ctx: Context) -> StageResult:
    if ctx.lock.torch_version is None:
        tools = ctx.gpu_tools()
        count = tools.nvml_device_count or max((len(v.gpus) for v in tools.views), default=0)
        view = next((v for v in tools.views if v.driver_version), None)
        driver = tools.nvml_driver or (view.driver_version if view else None)
        source = "NVML" if tools.nvml_driver else (view.tool if view else None)
        return gpu.decide_accelerator_without_torch(ctx.lock, count, driver, source)
    data = probe(ctx, "accelerator", "accelerator", {})
    ctx.device_count = int(data.get("device_count") or 0)
    env = data.get("env") or {}
    ctx.restricted = any(
        env.get(v) for v in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
    )
    tools = ctx.gpu_tools()
    driver, source = tools.nvml_driver, "NVML" if tools.nvml_driver else None
    if driver is None:
        view = next((v for v in tools.views if v.driver_version), None)
        driver, source = (view.driver_version, view.tool) if view else (None, None)
    res = gpu.decide_accelerator(ctx.lock, data, driver, source)
    if tools.errors:
        res = res.model_copy(update={"facts": {**res.facts, "tool_errors": tools.errors}})
    return res


def _devices(ctx: Context) -> StageResult:
    if not ctx.gpu:
        return gpu.decide_devices(ctx.lock, {}, [])
    data = probe(ctx, "devices", "devices", {})
    return gpu.decide_devices(ctx.lock, data, ctx.gpu_tools().views, ctx.restricted)


def _devices_list(ctx: Context) -> list[str]:
    return [f"cuda:{i}" for i in range(ctx.device_count)] if ctx.gpu else ["cpu"]


def _compute(ctx: Context) -> StageResult:
    return decide_work.decide_compute(probe(ctx, "compute", "compute", {"devices": _devices_list(ctx)}))


def _extensions(ctx: Context) -> StageResult:
    args = {
        "backend": ctx.lock.backend,
        "compile": ctx.lock.compile_extensions,
        "extensions": list(ctx.lock.extensions),
    }
    return decide_work.decide_extensions(ctx.lock, probe(ctx, "extensions", "extensions", args))


def _memory(ctx: Context) -> StageResult:
    if not ctx.gpu:
        return decide_work.decide_memory_cpu(ctx.lock, mem_available_bytes())
    need = decide_work.memory_need_bytes(ctx.lock)
    if need is None:
        return decide.skipped(
            "memory", "the lock declares no per-card memory need (resources.gpu_memory_gib)"
        )
    return decide_work.decide_memory_gpu(ctx.lock, probe(ctx, "memory", "memory", {"need_bytes": need}))


def _checkpoint(ctx: Context) -> StageResult:
    directory = Path(ctx.lock.checkpoint_dir)
    if not directory.is_absolute():
        directory = ctx.workdir / directory
    device = "cuda:0" if ctx.gpu else "cpu"
    args = {"dir": str(directory), "device": device, "steps": 8}
    save = probe(ctx, "checkpoint", "checkpoint", {**args, "mode": "save"}, cwd=ctx.workdir)
    resume = probe(ctx, "checkpoint", "checkpoint", {**args, "mode": "resume"}, cwd=ctx.workdir)
    return decide_work.decide_checkpoint(save, resume, device)


def _checks(ctx: Context) -> StageResult:
    return checks.run_checks(ctx.lock.checks, ctx.workdir, ctx.timeouts.get("checks"))


RUNNERS: dict[str, Callable[[Context], StageResult]] = {
    "interpreter": _interpreter,
    "os": _os,
    "packages": _packages,
    "accelerator": _accelerator,
    "devices": _devices,
    "compute": _compute,
    "extensions": _extensions,
    "memory": _memory,
    "checkpoint": _checkpoint,
    "checks": _checks,
}


def _run_one(ctx: Context, name: str) -> StageResult:
    start = time.monotonic()
    try:
        if name in TORCH_STAGES and ctx.lock.torch_version is None:
            kind = ctx.lock.profile_kind
            return decide.skipped(name, f"the lock declares no torch (profile kind {kind}): not applicable")
        res = RUNNERS[name](ctx)
    except ProbeFailed as exc:
        res = exc.result
    except (KeyboardInterrupt, Interrupted) as exc:
        sig = exc.signame if isinstance(exc, Interrupted) else "SIGINT"
        res = StageResult(stage=name, status="aborted", error=f"interrupted by {sig}", facts={"signal": sig})
    except Exception as exc:
        res = StageResult(
            stage=name,
            status="failed",
            error=f"internal error in stage {name}: {type(exc).__name__}: {exc}",
            hint="this is a bug in envbuild; please report it with this report",
        )
    return res.model_copy(update={"duration_s": round(time.monotonic() - start, 3)})


@dataclass
class RunOutcome:
    results: list[StageResult]
    stage_reached: str | None
    interrupted: str | None  # signal name


def run_stages(
    ctx: Context,
    selected: list[str],
    keep_going: bool,
    on_result: Callable[[StageResult], None] | None = None,
) -> RunOutcome:
    results: dict[str, StageResult] = {}
    ordered: list[StageResult] = []
    reached: str | None = None
    stop_reason: str | None = None
    interrupted: str | None = None

    def record(res: StageResult) -> None:
        results[res.stage] = res
        ordered.append(res)
        if on_result:
            on_result(res)

    try:
        for spec in STAGES:
            if spec.name not in selected:
                continue
            blocked = next((d for d in spec.needs if d in results and not results[d].ok), None)
            if blocked:
                word = results[blocked].status.replace("_", " ")
                record(
                    StageResult(stage=spec.name, status="aborted", error=f"prerequisite '{blocked}' {word}")
                )
                continue
            if stop_reason:
                record(StageResult(stage=spec.name, status="aborted", error=stop_reason))
                continue
            reached = spec.name
            res = _run_one(ctx, spec.name)
            record(res)
            if res.status == "aborted":  # interrupted inside the stage
                interrupted = str(res.facts.get("signal", "SIGINT"))
                break
            if not res.ok and not keep_going:
                word = res.status.replace("_", " ")
                stop_reason = f"not run: stage '{spec.name}' {word} (--keep-going runs independent stages)"
    except (KeyboardInterrupt, Interrupted) as exc:  # arrived between stages
        interrupted = exc.signame if isinstance(exc, Interrupted) else "SIGINT"
    for spec in STAGES:
        if spec.name in selected and spec.name not in results:
            record(
                StageResult(
                    stage=spec.name,
                    status="aborted",
                    error=f"not run: the run was interrupted ({interrupted})",
                )
            )
    return RunOutcome(ordered, reached, interrupted)
