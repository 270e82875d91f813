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
import ctypes
import ctypes.util
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

TAIL_BYTES = 64 * 1024
HEAD_BYTES = 4096
MARKER_LINE_MAX = 8 * 1024 * 1024
DRAIN_S = 2.0
READ_CHUNK = 64 * 1024
_TICK_S = 0.05  # how often the main process is polled where no pidfd can be waited on
_KILL_ROUNDS = 50

KillMechanism = Literal["subreaper", "group"]

PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37


# ----------------------------------------------------------------------------------------------------
# bounded output


class StreamBuffer:
    """The first ``head_max`` and the last ``tail_max`` bytes of a stream, and how many were dropped."""

    def __init__(self, tail_max: int = TAIL_BYTES, head_max: int = HEAD_BYTES) -> None:
        self.tail_max = tail_max
        self.head_max = head_max
        self.head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        if len(self.head) < self.head_max:
            self.head += data[: self.head_max - len(self.head)]
        if len(data) >= self.tail_max:
            self._tail = bytearray(data[-self.tail_max :])
            return
        self._tail += data
        excess = len(self._tail) - self.tail_max
        if excess > 0:
            del self._tail[:excess]

    @property
    def tail(self) -> bytes:
        return bytes(self._tail)

    @property
    def dropped(self) -> int:
        """Bytes of the stream that are not in the tail (the head, when kept, is a separate small copy)."""
        return self.total - len(self._tail)


class MarkerScanner:
    """Keeps the last line of a stream that starts with ``marker`` (without its newline).

    Lines that do not start with the marker are skipped without being held; a marker line longer than
    ``limit`` bytes is dropped and recorded in :attr:`overflow`.
    """

    def __init__(self, marker: bytes, limit: int = MARKER_LINE_MAX) -> None:
        if not marker or b"\n" in marker:
            raise ValueError("the marker must be non-empty and hold no newline")
        self.marker = marker
        self.limit = limit
        self.line: bytes | None = None
        self.overflow = False
        # The line being read when it may still be a marker line; None: skipping to the next line.
        self._candidate: bytearray | None = bytearray()  # the stream starts at a line start
        self._search = b"\n" + marker[:1]

    def feed(self, data: bytes) -> None:
        mlen = len(self.marker)
        pos, size = 0, len(data)
        while pos < size:
            cand = self._candidate
            if cand is None:  # jump to the next line that starts like the marker
                nxt = data.find(self._search, pos)
                if nxt < 0:
                    if data.endswith(b"\n"):
                        self._candidate = bytearray()
                    return
                self._candidate = bytearray()
                pos = nxt + 1
                continue
            nl = data.find(b"\n", pos)
            end = size if nl < 0 else nl
            if len(cand) < mlen:
                take = min(end, pos + mlen - len(cand))
                cand += data[pos:take]
                pos = take
                if cand != self.marker[: len(cand)]:
                    self._candidate = None  # not a marker line
                    continue
            if len(cand) >= mlen:
                cand += data[pos:end]
                if len(cand) > self.limit:
                    self._candidate, self.line, self.overflow = None, None, True
                    pos = end
                    continue
            pos = end
            if nl < 0:
                return
            if len(cand) >= mlen:
                self.line, self.overflow = bytes(cand), False
            self._candidate = bytearray()
            pos = nl + 1

    def close(self) -> None:
        """The stream ended: a marker line without a final newline counts too."""
        cand = self._candidate
        if cand is not None and len(cand) >= len(self.marker):
            self.line, self.overflow = bytes(cand), False
        self._candidate = None


# ----------------------------------------------------------------------------------------------------
# the subreaper and /proc


class _Subreaper:
    """Reference-counted ``PR_SET_CHILD_SUBREAPER``: set while any run is in progress, then restored."""

    _lock = threading.Lock()
    _users = 0
    _previous = 0
    _libc: Any = None
    _available: bool | None = None

    @classmethod
    def _prctl(cls) -> Any:
        if cls._available is None:
            cls._available = False
            if sys.platform.startswith("linux"):
                try:
                    cls._libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
                    cls._available = hasattr(cls._libc, "prctl")
                except OSError:  # pragma: no cover - no libc to load
                    cls._available = False
        return cls._libc.prctl if cls._available else None

    @classmethod
    def acquire(cls) -> bool:
        """Make this process a subreaper; whether it is one now."""
        with cls._lock:
            prctl = cls._prctl()
            if prctl is None:
                return False
            if cls._users == 0:
                current = ctypes.c_int(0)
                if prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(current), 0, 0, 0) != 0:
                    return False
                if not current.value and prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
                    return False
                cls._previous = current.value
            cls._users += 1
            return True

    @classmethod
    def release(cls) -> None:
        with cls._lock:
            cls._users -= 1
            if cls._users == 0 and not cls._previous:
                prctl = cls._prctl()
                if prctl is not None:
                    prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


@dataclass(frozen=True)
class ProcStat:
    state: str
    ppid: int
    pgid: int
    sid: int
    start: int  # clock ticks after boot


_PROC = Path("/proc")


def proc_stat(pid: int) -> ProcStat | None:
    """The fields of ``/proc/PID/stat`` envbuild reads, or None when there is no such process."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    except OSError:
        return None
    try:
        raw = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        return ProcStat(fields[0].decode(), int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))
    except (IndexError, ValueError):  # pragma: no cover - a format this code does not know
        return None


def _process_table() -> dict[int, ProcStat]:
    table: dict[int, ProcStat] = {}
    try:
        names = os.listdir(_PROC)
    except OSError:
        return table
    for name in names:
        if name.isdigit():
            st = proc_stat(int(name))
            if st is not None:
                table[int(name)] = st
    return table


def _dead(st: ProcStat) -> bool:
    return st.state in ("Z", "X", "x")


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


_ACTIVE: dict[int, _Run] = {}  # main pid -> run; read by kill_current() from a signal handler
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
    for run in list(_ACTIVE.values()):
        run.kill(from_signal=True)


def kill_thread_runs(ident: int) -> None:
    """Kill every process of the runs one thread has in progress (a background stage cancelled)."""
    for run in list(_ACTIVE.values()):
        if run.thread == ident:
            run.kill(from_signal=True)


class _Run:
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
        self.proc_fs = _PROC.is_dir()

    # -- membership --------------------------------------------------------------------------------

    def _members(self, table: dict[int, ProcStat]) -> dict[int, ProcStat]:
        theirs = (set(_ACTIVE) | _PROTECTED) - {self.pid}  # other runs and helpers, by pid and session
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
            members = self._members(_process_table()) if self.proc_fs else {}
        self._killpg()
        live = 0
        for pid, st in members.items():
            if _dead(st):
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
                    members = self._members(_process_table()) if self.proc_fs else {}
            reaped = False
            if self.subreaper:
                for pid, st in members.items():
                    if pid != self.pid and st.ppid == self.self_pid and _dead(st):
                        with contextlib.suppress(ChildProcessError):
                            reaped = os.waitpid(pid, os.WNOHANG)[0] != 0 or reaped
            if not reaped:
                break
            members = None
        return sorted(pid for pid, st in (members or {}).items() if not _dead(st))

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
    subreaper = _Subreaper.acquire()
    run = _Run(subreaper)
    try:
        with SPAWN_LOCK:
            if run.proc_fs:
                run.before = frozenset(p for p, st in _process_table().items() if st.ppid == run.self_pid)
            run.others = frozenset(_ACTIVE)
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
            _ACTIVE[proc.pid] = run
    except BaseException:
        if subreaper:
            _Subreaper.release()
        raise
    out_buf, err_buf = StreamBuffer(tail_bytes), StreamBuffer(tail_bytes)
    scanner = MarkerScanner(marker) if marker else None
    io = _Pipes(proc, stdin or b"", out_buf, err_buf, scanner)
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
        _ACTIVE.pop(proc.pid, None)
        if subreaper:
            _Subreaper.release()
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


class _Pipes:
    """The run's pipes and its pidfd on one selector: stdin written, stdout/stderr read into buffers."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        stdin: bytes,
        out_buf: StreamBuffer,
        err_buf: StreamBuffer,
        scanner: MarkerScanner | None,
    ) -> None:
        self.proc = proc
        self.pending = memoryview(stdin)
        self.scanner = scanner
        self.sel = selectors.DefaultSelector()
        self.readers: dict[int, tuple[IO[bytes], StreamBuffer]] = {}
        self.pidfd: int | None = None
        self._bufs = (out_buf, err_buf)

    def open(self) -> None:
        proc = self.proc
        streams = [(proc.stdout, self._bufs[0]), (proc.stderr, self._bufs[1])]
        for pipe, buf in streams:
            if pipe is not None:
                os.set_blocking(pipe.fileno(), False)
                self.sel.register(pipe.fileno(), selectors.EVENT_READ, "read")
                self.readers[pipe.fileno()] = (pipe, buf)
        if proc.stdin is not None:
            if self.pending:
                os.set_blocking(proc.stdin.fileno(), False)
                self.sel.register(proc.stdin.fileno(), selectors.EVENT_WRITE, "write")
            else:
                proc.stdin.close()
        if hasattr(os, "pidfd_open"):
            try:
                self.pidfd = os.pidfd_open(proc.pid)
            except OSError:  # pragma: no cover - a kernel before 5.3: poll instead
                self.pidfd = None
            else:
                self.sel.register(self.pidfd, selectors.EVENT_READ, "exit")

    def forget_exit(self) -> None:
        if self.pidfd is not None:
            self.sel.unregister(self.pidfd)
            os.close(self.pidfd)
            self.pidfd = None

    def _close_reader(self, fd: int) -> None:
        self.sel.unregister(fd)
        pipe, _ = self.readers.pop(fd)
        pipe.close()
        if self.scanner is not None and pipe is self.proc.stdout:
            self.scanner.close()

    def pump(self, timeout: float) -> None:
        """Wait up to ``timeout`` for the pipes or the main process's exit; move what is ready."""
        for key, _ in self.sel.select(timeout):
            fd = key.fd
            if key.data == "read":
                try:
                    chunk = os.read(fd, READ_CHUNK)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    self._close_reader(fd)
                    continue
                pipe, buf = self.readers[fd]
                buf.feed(chunk)
                if self.scanner is not None and pipe is self.proc.stdout:
                    self.scanner.feed(chunk)
            elif key.data == "write":
                try:
                    written = os.write(fd, self.pending[:READ_CHUNK])
                    self.pending = self.pending[written:]
                except BlockingIOError:
                    continue
                except OSError:  # BrokenPipeError: the program does not read its stdin
                    self.pending = memoryview(b"")
                if not self.pending:
                    self.sel.unregister(fd)
                    assert self.proc.stdin is not None
                    self.proc.stdin.close()

    def close(self) -> bool:
        """Close everything; whether a pipe was still open (held by a process that would not die)."""
        cut = bool(self.readers)
        self.forget_exit()
        if self.scanner is not None and self.proc.stdout is not None and not self.proc.stdout.closed:
            self.scanner.close()
        for key in list(self.sel.get_map().values()):
            self.sel.unregister(key.fd)
        self.sel.close()
        self.readers.clear()
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None and not pipe.closed:
                with contextlib.suppress(OSError):
                    pipe.close()
        return cut


__all__ = [
    "DRAIN_S",
    "MARKER_LINE_MAX",
    "TAIL_BYTES",
    "MarkerScanner",
    "RunResult",
    "StreamBuffer",
    "kill_current",
    "run_process",
]
