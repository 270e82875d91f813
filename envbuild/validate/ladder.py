"""The run: the selected stages in ladder order, the background stages beside it, and interruption.

Without ``keep_going`` the first failure stops the run; with it, a stage is aborted only when a fact
it requires is missing (:mod:`envbuild.validate.stages` explains ``needs`` and ``requires``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, replace

from envbuild.report.model import StageResult
from envbuild.validate import decide
from envbuild.validate.run_tree import kill_thread_runs
from envbuild.validate.stage_context import ProbeFailed, StageContext
from envbuild.validate.stage_runners import RUNNERS
from envbuild.validate.stages import FACTS, SPECS, STAGE_NAMES, STAGES, TORCH_STAGES, StageSpec
from envbuild.validate.worker import TorchWorker


class Interrupted(Exception):
    def __init__(self, signame: str) -> None:
        super().__init__(signame)
        self.signame = signame
        self.at = time.monotonic()  # when the signal came (the handler builds this before it kills)


def _run_one(ctx: StageContext, name: str) -> StageResult:
    start = time.monotonic()
    try:
        # a GPU lock without torch (ubuntu, blender) still has its hardware judged by the devices stage
        if name in TORCH_STAGES and ctx.lock.torch_version is None and not (name == "devices" and ctx.gpu):
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
                and not why_not(SPECS[later])
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
