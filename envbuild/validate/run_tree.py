"""The runs in progress (:mod:`envbuild.validate.runner`): which processes belong to each, and killing
them (:func:`kill_current` from the signal handler, :func:`kill_thread_runs` for a cancelled stage)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading

from envbuild.validate.proc_table import PROC, ProcStat, is_dead, process_table

_KILL_ROUNDS = 50


ACTIVE: dict[int, ProcessRun] = {}  # main pid -> run; read by kill_current() from a signal handler
# Children of the validator that no run may take for one of its orphans: other runs' main processes
# (their sessions) and long-lived helpers (the warm probe worker).  Spawning and registering happen
# under SPAWN_LOCK, and so does every membership scan, so a scan never sees an unregistered child.
_PROTECTED: set[int] = set()
SPAWN_LOCK = threading.RLock()


def protect(pid: int) -> None:
    """Keep ``pid`` (a session leader the caller started under :data:`SPAWN_LOCK`) out of every run."""
    _PROTECTED.add(pid)


def unprotect(pid: int) -> None:
    _PROTECTED.discard(pid)


def kill_current() -> None:
    """Kill every process of every run in progress (the SIGINT/SIGTERM handler's hook); never blocks."""
    for run in list(ACTIVE.values()):
        run.kill(from_signal=True)


def kill_thread_runs(ident: int) -> None:
    """Kill every process of the runs one thread has in progress (a background stage cancelled)."""
    for run in list(ACTIVE.values()):
        if run.thread == ident:
            run.kill(from_signal=True)


class ProcessRun:
    def __init__(self, subreaper: bool) -> None:
        self.subreaper = subreaper
        self.thread = threading.get_ident()
        self.self_pid = os.getpid()
        self.self_sid = os.getsid(0)
        self.pid = 0
        self.start_ticks = 0
        self.before: frozenset[int] = frozenset()
        self.others: frozenset[int] = frozenset()
        self.ended = False  # the main process exited or the timeout passed: what lives now is a straggler
        self.stragglers: set[int] = set()
        self.interrupted = False
        self.proc_fs = PROC.is_dir()

    # -- membership --------------------------------------------------------------------------------

    def _members(self, table: dict[int, ProcStat]) -> dict[int, ProcStat]:
        theirs = (set(ACTIVE) | _PROTECTED) - {self.pid}  # other runs and helpers, by pid and session
        roots: set[int] = set()
        for pid, st in table.items():
            if pid == self.self_pid or st.start < self.start_ticks:
                continue
            if (
                pid == self.pid
                or st.pgid == self.pid
                or st.sid == self.pid
                or (
                    self.subreaper
                    and st.ppid == self.self_pid
                    and pid not in self.before
                    and st.sid != self.self_sid
                    and st.sid not in self.others
                    and pid not in self.others
                    and st.sid not in theirs
                    and pid not in theirs
                )
            ):
                roots.add(pid)
        children: dict[int, list[int]] = {}
        for pid, st in table.items():
            children.setdefault(st.ppid, []).append(pid)
        members: dict[int, ProcStat] = {}
        pending = list(roots)
        while pending:
            pid = pending.pop()
            if pid in members or pid == self.self_pid:
                continue
            members[pid] = table[pid]
            pending.extend(c for c in children.get(pid, ()) if table[c].start >= self.start_ticks)
        return members

    # -- killing -----------------------------------------------------------------------------------

    def _killpg(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)

    def kill_round(self) -> int:
        """Kill the process group and every live member, reap orphans; how many were alive."""
        with SPAWN_LOCK:
            members = self._members(process_table()) if self.proc_fs else {}
        self._killpg()
        live = 0
        for pid, st in members.items():
            if is_dead(st):
                continue
            live += 1
            if pid != self.pid and self.ended:
                self.stragglers.add(pid)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        self.reap(members)
        return live

    def reap(self, members: dict[int, ProcStat] | None = None) -> list[int]:
        """Reap the run's processes re-parented to the validator (never the main one); those still alive."""
        for _ in range(_KILL_ROUNDS):  # reaping a zombie re-parents its zombie children: reap again
            if members is None:
                with SPAWN_LOCK:
                    members = self._members(process_table()) if self.proc_fs else {}
            reaped = False
            if self.subreaper:
                for pid, st in members.items():
                    if pid != self.pid and st.ppid == self.self_pid and is_dead(st):
                        with contextlib.suppress(ChildProcessError):
                            reaped = os.waitpid(pid, os.WNOHANG)[0] != 0 or reaped
            if not reaped:
                break
            members = None
        return sorted(pid for pid, st in (members or {}).items() if not is_dead(st))

    def kill(self, *, from_signal: bool = False) -> int:
        """Kill the whole tree now: a few quick rounds, no waiting (safe in a signal handler).

        Returns how many of its processes were still alive at the last round."""
        if from_signal:  # the run ends here: what is alive of it, besides the main process, straggles
            self.interrupted = self.ended = True
        live = 0
        for _ in range(3):
            live = self.kill_round()
            if live == 0:
                break
        return live
