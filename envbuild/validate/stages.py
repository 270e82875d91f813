"""The stage list, its dependency graph, and the runner.

Each stage gathers facts (a probe in the interpreter under test, or the vendor tools) and hands them
to a pure decision function.

Two relations between stages:

- ``needs``: the stages that come first.  ``--stages`` adds them, and without ``keep_going`` the run
  stops at the first failure: every later stage is ``aborted``, naming the failed prerequisite or the
  stage that stopped the run (the first error and the stage reached say where it stopped).
- ``requires``: the facts a stage cannot run without (:data:`FACTS`).  With ``keep_going`` a stage is
  aborted only when one of them is known to be missing: the interpreter under test does not start
  (nothing can run), torch does not import (no torch stage can run), torch sees no GPU (no device
  stage can run).  A failed verdict (a Python version the lock does not declare, a package
  difference, a wrong driver) hides nothing: every stage that can still tell the renter something
  runs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from envbuild.errors import UsageError, choices
from envbuild.models import CheckSpec, Lock
from envbuild.resources import cache_dir
from envbuild.validate import blender, checks, container, decide, decide_work, gpu, interp
from envbuild.validate.host import GpuToolFacts, collect_gpu_tools, mem_available_bytes
from envbuild.validate.model import StageResult, Status
from envbuild.validate.probe import ProbeResult, run_probe
from envbuild.validate.runner import kill_thread_runs
from envbuild.validate.worker import TorchWorker


@dataclass(frozen=True)
class StageSpec:
    name: str
    needs: tuple[str, ...]
    timeout_s: float
    what: str
    requires: tuple[str, ...] = ("python",)


# The facts a stage may require, and what their absence means to a renter.
FACTS: dict[str, str] = {
    "python": "the interpreter under test did not run a probe",
    "torch": "torch does not import in the interpreter under test",
    "devices": "torch sees no GPU",  # always there for a CPU lock
}
_TORCH_WORK = ("python", "torch", "devices")

STAGES: tuple[StageSpec, ...] = (
    StageSpec("interpreter", (), 60, "the interpreter and venv actually used", ()),
    StageSpec("os", (), 60, "distribution, version, glibc"),
    StageSpec(
        "container",
        (),
        30,
        "/dev/shm, device nodes the user can open, ulimits, cgroup memory and CPU limits",
        (),
    ),
    StageSpec("packages", ("interpreter",), 120, "installed distributions vs the lock, broken requirements"),
    StageSpec("accelerator", ("packages",), 180, "torch build variant, GPU visibility, driver"),
    StageSpec(
        "blender",
        ("accelerator",),
        600,
        "Blender's version, Cycles' devices per type, a fixed render on each declared device vs the CPU",
    ),
    StageSpec(
        "devices",
        ("accelerator",),
        180,
        "every device: name, memory, arch coverage, smi agreement",
        _TORCH_WORK,
    ),
    StageSpec("compute", ("devices",), 300, "matmul on each device vs a float64 reference", _TORCH_WORK),
    StageSpec(
        "extensions", ("compute",), 1200, "compile and run custom ops, extension smoke tests", _TORCH_WORK
    ),
    StageSpec(
        "memory", ("devices",), 300, "allocate the declared need on each device", ("python", "devices")
    ),
    StageSpec("checkpoint", ("compute",), 300, "save, resume in a fresh process, compare", _TORCH_WORK),
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


def skip_reasons(selected: Iterable[str], skip: Iterable[str]) -> dict[str, str]:
    """The selected stages that ``--skip`` leaves out, each with why: it was named, or it ``needs`` a
    skipped stage (transitively: ``--skip compute`` skips extensions and checkpoint too)."""
    named = {n.strip() for n in skip if n.strip()}
    for name in sorted(named):
        if name not in _SPECS:
            raise UsageError(f"--skip: unknown stage {name!r} (valid: {choices(STAGE_NAMES)})")
    root: dict[str, str] = {}  # skipped stage -> the --skip stage it follows from
    reasons: dict[str, str] = {}
    for spec in STAGES:  # in dependency order: a stage's needs come before it
        if spec.name in named:
            root[spec.name], reasons[spec.name] = spec.name, "skipped by --skip"
            continue
        gone = next((d for d in spec.needs if d in root), None)
        if gone is not None:
            root[spec.name] = root[gone]
            how = "skipped by --skip" if gone == root[gone] else f"skipped because of --skip {root[gone]}"
            reasons[spec.name] = f"needs stage '{gone}', {how}"
    wanted = set(selected)
    return {name: why for name, why in reasons.items() if name in wanted}


class Interrupted(Exception):
    def __init__(self, signame: str) -> None:
        super().__init__(signame)
        self.signame = signame
        self.at = time.monotonic()  # when the signal came (the handler builds this before it kills)


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


def _interpreter(ctx: StageContext) -> StageResult:
    data = probe(ctx, "interpreter", "interpreter", {})
    return decide.decide_interpreter(ctx.lock, data, ctx.python_chosen_by)


def _os(ctx: StageContext) -> StageResult:
    data = probe(ctx, "os", "os", {})
    if data.get("os_release"):
        ctx.raw["os-release"] = str(data["os_release"])
    return decide.decide_os(ctx.lock, data)


def _container(ctx: StageContext) -> StageResult:
    # read by the validator's own process: same user, limits and devices as the job in this container
    return container.decide_container(ctx.lock, container.collect(ctx.lock))


def _packages(ctx: StageContext) -> StageResult:
    data = probe(ctx, "packages", "packages", {})
    names, installed = data.get("names", {}), data.get("installed", {})
    ctx.raw["pip-freeze.txt"] = "".join(f"{names.get(k, k)}=={v}\n" for k, v in sorted(installed.items()))
    # data["requires"] (the probe's dependency graph) tells a broken distribution the lock needs from
    # one it does not
    return decide.decide_packages(ctx.lock, data, ctx.python)


TORCH_STAGES = frozenset({"devices", "compute", "extensions", "memory", "checkpoint"})


def _accelerator(ctx: StageContext) -> StageResult:
    if ctx.lock.torch_version is None:
        tools = ctx.gpu_tools()
        count = tools.nvml_device_count or max((len(v.gpus) for v in tools.views), default=0)
        view = next((v for v in tools.views if v.driver_version), None)
        driver = tools.nvml_driver or (view.driver_version if view else None)
        source = "NVML" if tools.nvml_driver else (view.tool if view else None)
        return gpu.decide_accelerator_without_torch(ctx.lock, count, driver, source)
    data = probe(ctx, "accelerator", "accelerator", {}, warm=True)
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
        res = replace(res, facts={**res.facts, "tool_errors": tools.errors})
    return res


def _devices(ctx: StageContext) -> StageResult:
    if not ctx.gpu:
        return gpu.decide_devices(ctx.lock, {}, [])
    data = probe(ctx, "devices", "devices", {}, warm=True)
    return gpu.decide_devices(ctx.lock, data, ctx.gpu_tools().views, ctx.restricted)


def _devices_list(ctx: StageContext) -> list[str]:
    return [f"cuda:{i}" for i in range(ctx.device_count)] if ctx.gpu else ["cpu"]


def _compute(ctx: StageContext) -> StageResult:
    data = probe(ctx, "compute", "compute", {"devices": _devices_list(ctx)}, warm=True)
    return decide_work.decide_compute(data)


def extension_cache_dir() -> str | None:
    """Where the extensions probe keeps the ops it built (torch's own build folders, one per hash of the
    build's inputs: see probes/probe_extensions.py); None: no home folder, every run builds afresh."""
    try:
        return str(cache_dir() / "torch-extensions")
    except RuntimeError:
        return None


def _extensions(ctx: StageContext) -> StageResult:
    cache = extension_cache_dir()
    args = {
        "backend": ctx.lock.backend,
        "compile": ctx.lock.compile_extensions,
        "extensions": list(ctx.lock.extensions),
        "cache_dir": cache,
    }
    # A second run on this machine: the ops are in the cache, so the warm worker (torch already
    # imported) loads and runs them.  A build, or an extension package's smoke test, runs in a process
    # of its own, beside the ladder.
    why_own = ""
    if ctx.lock.extensions:
        why_own = "the lock names extension packages (their smoke tests run apart)"
    elif ctx.lock.compile_extensions and not (
        cache and any(Path(cache).glob("envbuild_probe_*/envbuild_probe_*.so"))
    ):
        why_own = "no op is built in the cache yet"  # a first run: no need to wait for the worker
    if not why_own and ctx.use_worker and ctx.worker is not None:
        try:
            data = probe(ctx, "extensions", "extensions", {**args, "cached_only": True}, warm=True)
        except ProbeFailed as exc:
            stop = ctx.cancel.get("extensions")
            if stop is not None and stop.is_set():
                raise  # cancelled: the worker was killed for it
            why_own = f"the warm worker failed: {exc.result.error}"
        else:
            if "needs_build" not in data:
                res = decide_work.decide_extensions(ctx.lock, data)
                return replace(res, facts={**res.facts, "process": "warm worker"})
            why_own = str(data["needs_build"])
    res = decide_work.decide_extensions(ctx.lock, probe(ctx, "extensions", "extensions", args))
    return replace(
        res, facts={**res.facts, "process": "its own", **({"why_own": why_own} if why_own else {})}
    )


def _memory(ctx: StageContext) -> StageResult:
    if not ctx.gpu:
        return decide_work.decide_memory_cpu(ctx.lock, mem_available_bytes())
    need = decide_work.memory_need_bytes(ctx.lock)
    if need is None:
        return decide.skipped(
            "memory", "the lock declares no per-card memory need (resources.gpu_memory_gib)"
        )
    data = probe(ctx, "memory", "memory", {"need_bytes": need}, warm=True)
    return decide_work.decide_memory_gpu(ctx.lock, data)


def _checkpoint(ctx: StageContext) -> StageResult:
    """Save and resume in a fresh subfolder of the lock's checkpoint_dir, created here and removed after
    (with the folders above it this stage created, when empty): the user's files there are never
    touched.  A folder that refuses is an error naming it and the errno's meaning."""
    directory = Path(ctx.lock.checkpoint_dir)
    if not directory.is_absolute():
        directory = ctx.workdir / directory
    device = "cuda:0" if ctx.gpu else "cpu"
    made = [p for p in (directory, *directory.parents) if not p.exists()]  # deepest first
    try:
        directory.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="envbuild-checkpoint-", dir=directory))
    except OSError as exc:
        where = exc.filename or str(directory)
        return decide_work.checkpoint_folder_failed(
            str(directory), exc.errno or 0, str(where), "create a fresh folder in", os.getuid()
        )
    args = {"dir": str(work), "device": device, "steps": 8}
    try:
        # The save runs warm; the resume runs in another process that never trained (only imported
        # torch, started with the run), as a restarted job would.
        save = probe(ctx, "checkpoint", "checkpoint", {**args, "mode": "save"}, cwd=ctx.workdir, warm=True)
        if ctx.use_worker and ctx.resume_worker is not None:
            out = ctx.resume_worker.call(
                "checkpoint", {**args, "mode": "resume"}, ctx.timeout("checkpoint"), ctx.workdir
            )
            resume = probe_data(ctx, "checkpoint", "checkpoint", out)
        else:
            resume = probe(ctx, "checkpoint", "checkpoint", {**args, "mode": "resume"}, cwd=ctx.workdir)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        for parent in made:
            try:
                parent.rmdir()
            except OSError:
                break
    res = decide_work.decide_checkpoint(save, resume, device, str(directory), os.getuid())
    facts = {**res.facts, "work_folder": str(work), "work_folder_removed": not work.exists()}
    return replace(res, facts=facts)


def _blender(ctx: StageContext) -> StageResult:
    if not ctx.lock.blender_version:
        return decide.skipped("blender", "the lock declares no Blender: not applicable")
    out_dir = blender.temp_dir()
    try:
        args = blender.probe_args(ctx.lock, out_dir)
        run = blender.run_blender_probe(ctx.lock, ctx.python, args, ctx.timeout("blender"))
        data = probe_data(ctx, "blender", "blender", run)
        ctx.files.update(blender.collect_pngs(data, out_dir))
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    # the vendor tools only matter for a GPU device Blender does not see
    wants_gpu = any(d != "CPU" for d in ctx.lock.blender_devices)
    return blender.decide_blender(ctx.lock, data, ctx.gpu_tools() if wants_gpu else None)


def check_specs(ctx: StageContext) -> tuple[CheckSpec, ...]:
    """The lock's checks as they run: a bare ``python`` / ``python3`` / ``pythonX.Y`` as argv[0] is
    the interpreter under test."""
    return tuple(replace(c, run=interp.check_argv(c.run, ctx.python)) for c in ctx.lock.checks)


def _checks(ctx: StageContext) -> StageResult:
    env = interp.check_env(ctx.python, os.environ)
    path = env["PATH"]
    res = checks.run_checks(
        check_specs(ctx), ctx.workdir, ctx.timeouts.get("checks"), env=env, cancel=ctx.cancel.get("checks")
    )
    if res.status == "skipped":
        return res
    shown = {**res.facts, "python": ctx.python, "path_first": path.split(os.pathsep)[0]}
    if res.error:
        return replace(res, facts=shown, hint="see the check's output tail in the report (report.md, Checks)")
    return replace(res, facts=shown)


RUNNERS: dict[str, Callable[[StageContext], StageResult]] = {
    "interpreter": _interpreter,
    "os": _os,
    "container": _container,
    "packages": _packages,
    "accelerator": _accelerator,
    "blender": _blender,
    "devices": _devices,
    "compute": _compute,
    "extensions": _extensions,
    "memory": _memory,
    "checkpoint": _checkpoint,
    "checks": _checks,
}


def _run_one(ctx: StageContext, name: str) -> StageResult:
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
        at = exc.at if isinstance(exc, Interrupted) else time.monotonic()
        ctx.interrupted_at = ctx.interrupted_at or at
        return interrupted_result(name, sig, at - start)
    except Exception as exc:
        res = StageResult(
            stage=name,
            status="failed",
            error=f"internal error in stage {name}: {type(exc).__name__}: {exc}",
            hint="this is a bug in envbuild; please report it with this report",
        )
    return replace(res, duration_s=round(time.monotonic() - start, 3))


def interrupted_result(name: str, sig: str, seconds: float) -> StageResult:
    """A stage that was running when the signal came: it ran, for ``seconds``, and did not finish."""
    return StageResult(
        stage=name,
        status="aborted",
        error=f"interrupted by {sig} after {seconds:.1f} s",
        facts={"signal": sig},
        duration_s=round(seconds, 3),
    )


def strict_result(res: StageResult) -> StageResult:
    """``--strict``: a passed stage with warnings fails, its warnings the error."""
    warned = [str(w) for w in res.facts.get("warnings") or []]
    if res.status != "passed" or not warned:
        return res
    return replace(res, status="failed", error="warning (--strict): " + "; ".join(warned))


@dataclass
class RunOutcome:
    results: list[StageResult]
    stage_reached: str | None
    interrupted: str | None  # signal name


def learn_facts(ctx: StageContext, res: StageResult) -> None:
    """Record which :data:`FACTS` a finished stage established, or showed to be missing."""
    why = f"stage '{res.stage}' {res.status.replace('_', ' ')}" + (f": {res.error}" if res.error else "")
    if res.stage == "interpreter":
        # A verdict on the probe's facts (passed, or failed on the version) means the interpreter runs.
        ctx.facts["python"] = ("version" in res.facts, why)
    elif res.stage == "accelerator" and ctx.lock.torch_version is not None:
        if "probe" in res.facts and "torch_version" not in res.facts:
            return  # the probe itself hung or crashed: whether torch imports is still unknown
        imports = bool(res.facts.get("torch_version"))
        ctx.facts["torch"] = (imports, why)
        # A CPU lock's only device is the CPU (its memory stage needs no torch); a GPU lock's devices
        # are those torch sees.
        seen = not ctx.gpu or (imports and int(res.facts.get("device_count") or 0) > 0)
        ctx.facts["devices"] = (seen, why)


def missing_fact(ctx: StageContext, spec: StageSpec) -> str | None:
    """Why ``spec`` cannot run: the first fact it requires that a stage showed to be missing.

    A fact nobody established (its stage was not selected) is not missing: the stage finds out.
    """
    if spec.name in TORCH_STAGES and ctx.lock.torch_version is None:
        return None  # not applicable: _run_one skips it with the reason
    for fact in spec.requires:
        known, why = ctx.facts.get(fact, (True, ""))
        if not known:
            return f"not run: {FACTS[fact]} ({why})"
    return None


# Stages that run beside the ladder (their results are still recorded in ladder order): the
# extension build starts with the run (it is the longest stage), the pilot checks once the packages
# stage has been recorded and would not stop them.
BACKGROUND_AT_START = ("extensions",)
BACKGROUND_AFTER = {"packages": "checks"}


class Background:
    """Stages running in threads; a stage the run will not reach is cancelled and its processes killed."""

    def __init__(self, ctx: StageContext) -> None:
        self.ctx = ctx
        self.pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="envbuild-stage")
        self.futures: dict[str, Future[StageResult]] = {}
        self.threads: dict[str, int] = {}
        self.started: dict[str, float] = {}  # time.monotonic() when the stage began, and ended
        self.ended: dict[str, float] = {}

    def start(self, name: str) -> None:
        self.ctx.cancel[name] = threading.Event()

        def task() -> StageResult:
            self.threads[name] = threading.get_ident()
            self.started[name] = time.monotonic()
            try:
                return _run_one(self.ctx, name)
            finally:
                self.ended[name] = time.monotonic()

        self.futures[name] = self.pool.submit(task)

    def __contains__(self, name: str) -> bool:
        return name in self.futures

    def take(self, name: str) -> StageResult:
        res = self.futures[name].result()  # a signal while waiting leaves the stage to interrupted()
        del self.futures[name]
        return res

    def interrupted(self, sig: str, at: float) -> list[StageResult]:
        """The run was interrupted at ``at``: the result of each stage that had finished by then, and
        "interrupted after N s" for each that was running (then cancelled).  A stage that never
        started is left out (it was not run)."""
        out = []
        for name, future in list(self.futures.items()):
            if future.done() and not future.cancelled() and self.ended.get(name, at) < at:
                out.append(self.take(name))
            elif name in self.started:
                self.cancel(name)
                out.append(interrupted_result(name, sig, at - self.started[name]))
        return out

    def cancel(self, name: str) -> None:
        future = self.futures.pop(name, None)
        if future is None:
            return
        self.ctx.cancel[name].set()
        if future.cancel():
            return
        while not future.done():
            ident = self.threads.get(name)
            if ident is not None:
                kill_thread_runs(ident)
                if self.ctx.worker is not None:  # a request of the stage in the warm worker
                    self.ctx.worker.kill_for_thread(ident)
            wait_futures([future], timeout=0.1)

    def close(self) -> None:
        for name in list(self.futures):
            self.cancel(name)
        self.pool.shutdown(wait=True)


def start_workers(ctx: StageContext, selected: list[str]) -> None:
    """Start the warm worker (and the resume's fresh process) with the run, so torch imports meanwhile."""
    if not ctx.use_worker or ctx.lock.torch_version is None:
        return
    if {"accelerator", "devices", "compute", "memory", "checkpoint"} & set(selected):
        ctx.worker = ctx.worker or TorchWorker(ctx.python)
        ctx.worker.prestart()
    if "checkpoint" in selected:
        ctx.resume_worker = ctx.resume_worker or TorchWorker(ctx.python)
        ctx.resume_worker.prestart()


def run_stages(
    ctx: StageContext,
    selected: list[str],
    keep_going: bool,
    on_result: Callable[[StageResult], None] | None = None,
) -> RunOutcome:
    """Run the selected stages in order.

    Without ``keep_going`` the first failure stops the run (every later stage is aborted, naming the
    failed prerequisite or the stage that stopped it).  With ``keep_going`` a stage is aborted only
    when a fact it requires is missing (:func:`missing_fact`).
    """
    results: dict[str, StageResult] = {}
    ordered: list[StageResult] = []
    stop_reason: str | None = None
    interrupted: str | None = None

    def record(res: StageResult) -> None:
        results[res.stage] = res
        ordered.append(res)
        if on_result:
            on_result(res)

    background = Background(ctx)

    def why_not(spec: StageSpec) -> str | None:
        """Why ``spec`` will not run now (it is aborted), or None."""
        if keep_going:
            return missing_fact(ctx, spec)
        blocked = next((d for d in spec.needs if d in results and not results[d].ok), None)
        if blocked:
            return f"prerequisite '{blocked}' {results[blocked].status.replace('_', ' ')}"
        return stop_reason

    running = [n for n in selected if n not in ctx.skip]  # --skip: recorded as skipped, never started
    try:
        start_workers(ctx, running)
        for name in BACKGROUND_AT_START:
            if name in running and ctx.lock.torch_version is not None:
                background.start(name)
        for spec in STAGES:
            if spec.name not in selected:
                continue
            if spec.name in ctx.skip:
                record(decide.skipped(spec.name, ctx.skip[spec.name], skipped_by="--skip"))
                continue
            reason = why_not(spec)
            if reason:
                background.cancel(spec.name)
                record(StageResult(stage=spec.name, status="aborted", error=reason))
                continue
            res = background.take(spec.name) if spec.name in background else _run_one(ctx, spec.name)
            record(strict_result(res) if ctx.strict else res)
            res = results[spec.name]
            if res.status == "aborted":  # interrupted inside the stage
                interrupted = str(res.facts.get("signal", "SIGINT"))
                break
            learn_facts(ctx, res)
            if not res.ok and not keep_going:
                word = res.status.replace("_", " ")
                stop_reason = (
                    f"not run: stage '{spec.name}' {word} (--keep-going runs every stage that still can)"
                )
            later = BACKGROUND_AFTER.get(spec.name, "")
            if (
                later in running
                and later not in background
                and later not in results
                and not why_not(_SPECS[later])
            ):
                background.start(later)
    except (KeyboardInterrupt, Interrupted) as exc:  # arrived between stages
        interrupted = exc.signame if isinstance(exc, Interrupted) else "SIGINT"
        ctx.interrupted_at = ctx.interrupted_at or (
            exc.at if isinstance(exc, Interrupted) else time.monotonic()
        )
    finally:
        if interrupted:  # the background stages that ran, ran: each says for how long
            for res in background.interrupted(interrupted, ctx.interrupted_at or time.monotonic()):
                record(res)
        background.close()
        for worker in (ctx.worker, ctx.resume_worker):
            if worker is not None:
                worker.close()
    for spec in STAGES:
        if spec.name in selected and spec.name not in results:
            record(
                StageResult(
                    stage=spec.name,
                    status="aborted",
                    error=f"not run: the run was interrupted ({interrupted})",
                )
            )
    ordered.sort(key=lambda r: STAGE_NAMES.index(r.stage))
    # the last stage that ran: not one skipped, nor one aborted before it started
    reached = next((r.stage for r in reversed(ordered) if ran(r)), None)
    return RunOutcome(ordered, reached, interrupted)


def ran(res: StageResult) -> bool:
    """Whether the stage ran (passed, failed, timed out, or was interrupted while running)."""
    return res.status in ("passed", "failed", "timed_out") or (
        res.status == "aborted" and "signal" in res.facts
    )
