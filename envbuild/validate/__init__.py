"""``envbuild validate``: check the machine received against the lock, stage by stage.

Public API: :func:`run_validation` (what the CLI and ``envbuild validate --image`` call),
:func:`run` (the stage API named in docs/architecture.md), :class:`Report`, :class:`StageResult`,
:data:`STAGE_NAMES`.  Reading a report (verify, diff, load) is :mod:`envbuild.report`'s.

Exit codes (:func:`exit_code`): 0 every stage passed or was skipped as not applicable (with its
reason), 1 a stage failed or timed out, 2 bad input (no lock found, a bad lock, --python, --stages,
--timeout; raised before any report folder is created), 130 / 143 interrupted by SIGINT / SIGTERM (the
report is still written, with ``interrupted: true``).

What is validated (:mod:`envbuild.validate.interp`): the lock is ``--lock FILE``, ``--lock BUNDLE``
or the first of /etc/envbuild/envbuild.lock.json (inside the image) and ./envbuild.lock.json; the
interpreter is ``--python``, else the lock's, else the active venv / conda environment, else
envbuild's own; the checks run in ``--workdir``, else the bundle's ``app/`` (a lock read from a
bundle folder), else the lock's workdir (inside the image), else the current folder.

Test and debugging hook: ``ENVBUILD_PROBE_<STAGE>=/path/script.py`` runs that script instead of the
built-in probe for a stage (same protocol: JSON arguments on stdin, ``ENVBUILD-RESULT <json>`` line).

This module imports neither torch nor docker: torch is only imported inside the probe processes,
which run in the interpreter under test.
"""

from __future__ import annotations

import hashlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from types import FrameType
from typing import Any

from envbuild import __version__
from envbuild.boundary import to_data, to_json
from envbuild.errors import ReportError, UsageError
from envbuild.models import Lock, read_lock
from envbuild.report.folder import discard_run_dir, new_run_dir
from envbuild.report.model import FirstFailure, LockRef, Report, StageResult
from envbuild.report.write import write_report
from envbuild.untrusted import terminal
from envbuild.validate.host import host_facts
from envbuild.validate.interp import DEFAULT_LOCK, SOURCE_SELF, choose_python, default_workdir, find_lock
from envbuild.validate.ladder import Interrupted, run_stages
from envbuild.validate.probe import kill_current
from envbuild.validate.rendezvous import FleetSpec
from envbuild.validate.runfolder import StaleRun, clear_env, finish_run, settle_stale_runs, start_run
from envbuild.validate.stage_context import StageContext
from envbuild.validate.stages import (
    GPU_DEFAULT_ONLY,
    PERF_BUDGET_S,
    STAGE_NAMES,
    select_stages,
    skip_reasons,
)
from envbuild.validate.worker import kill_workers

__all__ = [
    "DEFAULT_LOCK",
    "STAGE_NAMES",
    "Report",
    "StageResult",
    "exit_code",
    "resolve_python",
    "run",
    "run_validation",
]

SIGNAL_EXIT = {"SIGINT": 130, "SIGTERM": 143}


def resolve_python(explicit: str | None, lock: Lock) -> str:
    """The interpreter under test (see :func:`envbuild.validate.interp.choose_python`)."""
    return choose_python(explicit, lock)[0]


@contextmanager
def _signals_raise() -> Iterator[None]:
    """While validating, SIGTERM/SIGINT stop the current probe and raise :class:`Interrupted`."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        exc = Interrupted(signal.Signals(signum).name)  # its time is the signal's, before anything dies
        kill_current()
        kill_workers()
        raise exc

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def run_validation(
    lock: Lock | Path | None,
    *,
    python: str | None = None,
    out: Path = Path("runs"),
    stages: Sequence[str] | None = None,
    keep_going: bool = False,
    workdir: Path | None = None,
    timeouts: Mapping[str, float] | None = None,
    on_result: Callable[[StageResult], None] | None = None,
    on_stale: Callable[[StaleRun], None] | None = None,
    skip: Sequence[str] = (),
    strict: bool = False,
    perf_budget: float | None = None,
    fleet: FleetSpec | None = None,
) -> tuple[Report, Path]:
    """Validate this machine against ``lock``; write a new report folder under ``out``.

    ``lock`` is a lock, a lock file, a bundle folder, or None (look in the usual places, see
    :func:`envbuild.validate.interp.find_lock`).  ``skip``: stages recorded as skipped without running,
    with every stage that needs one of them (:func:`~envbuild.validate.stages.skip_reasons`).
    ``strict`` (``--strict``): a stage that passed with warnings fails, its warnings the error.
    ``perf_budget`` (``--perf-budget``): seconds the performance stage measures for (60 by default); it is
    in the default ladder of a GPU lock, and runs on a CPU lock when ``stages`` names it.  ``fleet``
    (``--fleet``): the stage also measures an all-reduce across the lots (:mod:`.rendezvous`).
    Returns the report and its folder.  Raises
    :class:`~envbuild.errors.LockError` / :class:`~envbuild.errors.UsageError` for bad input (before
    anything is written).

    A previous run under ``out`` that was killed before its report (SIGKILL, a crash) is found first:
    what is left of its processes is killed, its folder marked ``INCOMPLETE.json``, and ``on_stale`` (by
    default a warning on stderr) is told (:mod:`envbuild.validate.runfolder`).
    """
    bundle: Path | None = None
    if isinstance(lock, Lock):
        lock_obj, lock_path = lock, "(in memory)"
        raw_lock = to_json(lock).encode()
    else:
        where = find_lock(lock)
        bundle = where.bundle
        lock_path, raw_lock = os.path.abspath(where.path), _read_bytes(where.path)
        lock_obj = read_lock(where.path)
    selected = select_stages(stages)
    if stages is None and not lock_obj.blender_version:
        selected.remove("blender")  # not applicable, and not listed in a report that never needs it
    if stages is None and lock_obj.backend not in ("cuda", "rocm"):
        selected = [name for name in selected if name not in GPU_DEFAULT_ONLY]  # opt-in on the CPU
    if perf_budget is not None and not 1 <= perf_budget <= 3600:
        raise UsageError(f"--perf-budget {perf_budget:g}: expected seconds between 1 and 3600")
    skipped = skip_reasons(selected, skip)  # --skip: recorded as skipped, with why
    for key in timeouts or {}:
        if key not in STAGE_NAMES:
            raise UsageError(f"--timeout: unknown stage {key!r} (valid: {', '.join(STAGE_NAMES)})")
    interpreter, chosen_by = choose_python(python, lock_obj)
    if workdir is None:
        workdir = default_workdir(lock_obj, bundle)
    elif not workdir.is_dir():
        raise UsageError(f"--workdir {workdir}: not a directory")
    ctx = StageContext(
        lock=lock_obj,
        python=interpreter,
        workdir=workdir.resolve(),
        timeouts=dict(timeouts or {}),
        python_chosen_by=chosen_by,
        skip=skipped,
        strict=strict,
        perf_budget_s=perf_budget if perf_budget is not None else PERF_BUDGET_S,
        fleet=fleet,
    )
    for stale in settle_stale_runs(out):
        (on_stale or _warn)(stale)
    run_dir = new_run_dir(out)
    try:
        start_run(run_dir)
    except OSError as exc:
        discard_run_dir(run_dir)
        raise ReportError(
            f"{exc.filename or run_dir}: cannot write the run's marker: {exc.strerror or exc}; nothing "
            "was run. Free space (or choose another --out) and run again"
        ) from None
    started = datetime.now(timezone.utc)
    t0 = time.monotonic()
    try:
        with _signals_raise():
            outcome = run_stages(ctx, selected, keep_going, on_result)
            # A second signal while the report is written must not leave it half-written.
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    finally:
        clear_env(run_dir)  # env.txt describes the machine, not this run's mark
    try:
        report = _build_report(run_dir, lock_path, raw_lock, lock_obj, interpreter, ctx, outcome, started, t0)
        try:
            write_report(run_dir, report, ctx.raw, os.environ, ctx.files)
        except OSError as exc:  # a full disk: no half-written report is left to be taken for one
            discard_run_dir(run_dir)
            raise ReportError(
                f"{exc.filename or run_dir}: cannot write the report: {exc.strerror or exc}; the run folder "
                f"{run_dir} was removed, nothing half-written is kept. Free space (or choose another "
                "--out) and run again"
            ) from None
        finish_run(run_dir)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    return report, run_dir


def _warn(stale: StaleRun) -> None:
    print(f"envbuild: warning: {terminal(stale.message)}", file=sys.stderr)  # RUNNING.json's host, pid


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""  # read_lock raises the clear error


def _build_report(
    run_dir: Path,
    lock_path: str,
    raw_lock: bytes,
    lock: Lock,
    interpreter: str,
    ctx: StageContext,
    outcome: Any,
    started: datetime,
    t0: float,
) -> Report:
    results: list[StageResult] = outcome.results
    failed = next((r for r in results if r.status in ("failed", "timed_out")), None)
    first = FirstFailure(stage=failed.stage, error=failed.error or failed.status) if failed else None
    if first is not None and failed is not None and _own_interpreter_lacks_packages(ctx, failed):
        first = FirstFailure(
            stage=first.stage, error=f"validating envbuild's own interpreter; pass --python: {first.error}"
        )
    if first is None and outcome.interrupted:
        cut = next((r for r in results if r.status == "aborted" and "signal" in r.facts), None)
        first = (
            FirstFailure(stage=cut.stage, error=cut.error or f"interrupted by {outcome.interrupted}")
            if cut
            else FirstFailure(
                stage=outcome.stage_reached or "-", error=f"interrupted by {outcome.interrupted}"
            )
        )
    ok = all(r.ok for r in results) and not outcome.interrupted
    return Report(
        run_id=run_dir.name,
        envbuild_version=__version__,
        started_at=started.isoformat(timespec="seconds"),
        finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        duration_s=round(time.monotonic() - t0, 3),
        python=interpreter,
        workdir=str(ctx.workdir),
        lock=LockRef(path=lock_path, sha256=hashlib.sha256(raw_lock).hexdigest(), content=to_data(lock)),
        stages=tuple(results),
        first_failure=first,
        stage_reached=outcome.stage_reached,
        ok=ok,
        interrupted=outcome.interrupted is not None,
        signal=outcome.interrupted,
        host=host_facts(),
        hardware=ctx.hardware,
    )


def _own_interpreter_lacks_packages(ctx: StageContext, failed: StageResult) -> bool:
    """No --python, no lock interpreter here, no active environment: envbuild validated its own
    interpreter, and the packages stage found the lock's packages missing from it."""
    if ctx.python_chosen_by != SOURCE_SELF or failed.stage != "packages":
        return False
    declared = failed.facts.get("declared_installed") or {}
    return bool(failed.facts.get("missing")) or any(v is None for v in declared.values())


def exit_code(report: Report) -> int:
    """0 all passed (or skipped with a reason), 1 a stage failed, 130/143 interrupted by SIGINT/SIGTERM."""
    if report.interrupted:
        return SIGNAL_EXIT.get(report.signal or "", 1)
    return 0 if report.ok else 1


def run(
    lock: Lock | Path | None,
    python: str | None = None,
    out: Path = Path("runs"),
    stages: Sequence[str] | None = None,
    keep_going: bool = False,
) -> Report:
    """The stage API of docs/architecture.md: validate, return the report (folder ``out/<run_id>``)."""
    return run_validation(lock, python=python, out=out, stages=stages, keep_going=keep_going)[0]
