"""Run one command (a probe or a pilot check) so that no process it starts outlives it.

:func:`run_process` starts ``argv`` in a new session, feeds it ``stdin`` and reads stdout/stderr with a
selector into bounded buffers (the last ``tail_bytes`` of each stream with a count of the bytes dropped
before them, plus the first :data:`HEAD_BYTES`), so the validator's memory stays flat whatever the
command prints.  When a ``marker`` is given, the last stdout line that starts with it is kept whole (up
to :data:`MARKER_LINE_MAX` bytes): the probes' ``ENVBUILD-RESULT <json>`` line is found even after
hundreds of megabytes of chatter.

The run ends when the main process exits or the timeout passes.  Either way, every process of the run
that is still alive is then killed with SIGKILL and reaped, and the pipes are drained for at most
``drain_s`` seconds and closed, whoever still holds them:

- ``subreaper`` (Linux): for the duration of a run the validator is a child subreaper
  (``prctl(PR_SET_CHILD_SUBREAPER)``), so a descendant whose parent dies (a double-forked daemon, a
  ``setsid`` child) is re-parented to the validator instead of init.  The run's processes are then found
  in ``/proc``: the main process, its process group and session, processes re-parented to the validator
  since the run started (excluding the validator's pre-existing children, processes in the validator's
  own session, and other runs' sessions), and every descendant of those.  They are killed in rounds
  until a scan finds none alive (a process forking while it is killed is caught by the next round), and
  re-parented orphans are reaped with a non-blocking ``waitpid``.
- ``group``: where the subreaper cannot be set (not Linux, no ``prctl``), only the process group (and
  the session, where ``/proc`` exists) is killed; a daemon that left both is out of reach.

A cgroup is not used: the subreaper covers every descendant that stays in the validator's PID
namespace, needs no privilege and no writable cgroup v2 hierarchy.

:func:`kill_current` kills the tree of every run in progress; the validator's SIGINT/SIGTERM handler
calls it.  Runs are meant to be sequential (the validator runs one stage at a time); two runs in
parallel threads stay apart by session, but an orphan re-parented during both runs could be counted
by either.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from envbuild.validate.proc_table import Subreaper, proc_stat, process_table
from envbuild.validate.run_output import TAIL_BYTES, MarkerScanner, Pipes, StreamBuffer
from envbuild.validate.run_tree import ACTIVE, SPAWN_LOCK, ProcessRun

DRAIN_S = 2.0
_TICK_S = 0.05  # how often the main process is polled where no pidfd can be waited on

KillMechanism = Literal["subreaper", "group"]


# ----------------------------------------------------------------------------------------------------
# one run


@dataclass
class RunResult:
    """What :func:`run_process` saw.  ``returncode`` is None only when the main process would not die."""

    returncode: int | None
    timed_out: bool
    duration_s: float
    stdout: StreamBuffer
    stderr: StreamBuffer
    killed_via: KillMechanism
    # processes other than the main one still alive when the run ended (exit, timeout, kill_current())
    stragglers_killed: int = 0
    survivors: tuple[int, ...] = ()  # processes of the run still alive after the drain time
    pipes_cut: bool = False  # a pipe was still open after the drain time and was closed regardless
    interrupted: bool = False  # kill_current() was called during the run
    marker_line: bytes | None = None
    marker_overflow: bool = False

    @property
    def killed(self) -> bool:
        return self.timed_out or self.interrupted or self.stragglers_killed > 0

    def facts(self) -> dict[str, Any]:
        """Report facts: dropped bytes and stragglers always, the kill mechanism when anything was killed."""
        out: dict[str, Any] = {
            "stdout_dropped_bytes": self.stdout.dropped,
            "stderr_dropped_bytes": self.stderr.dropped,
            "stragglers_killed": self.stragglers_killed,
        }
        if self.killed:
            out["killed_via"] = self.killed_via
        if self.pipes_cut:
            out["pipes_closed_after_drain"] = True
        if self.survivors:
            out["survivors"] = list(self.survivors)
        return out


def _main_exited(pid: int) -> bool:
    """Whether the main process has exited, without reaping it (its pid stays taken, so the group too)."""
    try:
        res = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return res is not None and res.si_pid != 0


def run_process(
    argv: Sequence[str],
    *,
    timeout_s: float,
    stdin: bytes | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    merge_stderr: bool = False,
    marker: bytes | None = None,
    tail_bytes: int = TAIL_BYTES,
    drain_s: float = DRAIN_S,
) -> RunResult:
    """Run ``argv`` for at most ``timeout_s`` seconds; kill every process it started when it ends.

    ``stdin`` is written to the process and then closed (None: the validator's stdin is inherited).
    ``merge_stderr`` sends stderr into the stdout pipe.  Raises :class:`OSError` when the program cannot
    be started; never raises for a misbehaving program.  KeyboardInterrupt (or any exception raised by a
    signal handler) during the run kills the tree and propagates.
    """
    subreaper = Subreaper.acquire()
    run = ProcessRun(subreaper)
    try:
        with SPAWN_LOCK:
            if run.proc_fs:
                run.before = frozenset(p for p, st in process_table().items() if st.ppid == run.self_pid)
            run.others = frozenset(ACTIVE)
            start = time.monotonic()
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE if stdin is not None else None,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
                start_new_session=True,
                env=dict(env) if env is not None else None,
                cwd=str(cwd) if cwd is not None else None,
            )
            run.pid = proc.pid
            ACTIVE[proc.pid] = run
    except BaseException:
        if subreaper:
            Subreaper.release()
        raise
    out_buf, err_buf = StreamBuffer(tail_bytes), StreamBuffer(tail_bytes)
    scanner = MarkerScanner(marker) if marker else None
    io = Pipes(proc, stdin or b"", out_buf, err_buf, scanner)
    timed_out = finished = False
    returncode: int | None = None
    try:
        st = proc_stat(proc.pid) if run.proc_fs else None
        run.start_ticks = st.start if st is not None else 0
        io.open()
        deadline = start + timeout_s
        while not _main_exited(proc.pid):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            io.pump(remaining if io.pidfd is not None else min(remaining, _TICK_S))
        # The run is over: what is alive of it now is a straggler (or, on a timeout, the whole tree).
        run.ended = True
        alive = run.kill() > 0
        io.forget_exit()
        drain_end = time.monotonic() + drain_s
        next_scan = time.monotonic() + 0.05
        while (now := time.monotonic()) < drain_end:
            if now >= next_scan:  # SIGKILL is not instant: kill again until a scan finds none alive
                alive = run.kill_round() > 0
                next_scan = now + 0.05
            if not io.readers and not alive:
                break
            if io.readers:
                io.pump(min(drain_end - now, 0.05))
            else:
                time.sleep(min(drain_end - now, 0.02))
        try:
            returncode = proc.wait(timeout=max(0.0, drain_end - time.monotonic()) + 0.5)
        except subprocess.TimeoutExpired:
            returncode = None
        survivors = run.reap()
        finished = True
    finally:
        if not finished:  # interrupted (KeyboardInterrupt, a signal handler's exception): stop the tree
            run.ended = True
            run.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=1)
            run.reap()
        pipes_cut = io.close()
        ACTIVE.pop(proc.pid, None)
        if subreaper:
            Subreaper.release()
    return RunResult(
        returncode=returncode,
        timed_out=timed_out,
        duration_s=time.monotonic() - start,
        stdout=out_buf,
        stderr=err_buf,
        killed_via="subreaper" if subreaper and run.proc_fs else "group",
        stragglers_killed=len(run.stragglers),
        survivors=tuple(survivors),
        pipes_cut=pipes_cut,
        interrupted=run.interrupted,
        marker_line=scanner.line if scanner else None,
        marker_overflow=scanner.overflow if scanner else False,
    )


__all__ = [
    "DRAIN_S",
    "RunResult",
    "run_process",
]
