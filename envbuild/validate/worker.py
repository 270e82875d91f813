"""The warm probe worker, seen from the validator: torch is imported once per run, not once per stage.

The stages that need torch but not a fresh process (accelerator, devices, compute, memory, and the
checkpoint's save) send their probe to one long-lived process in the interpreter under test
(``probes/probe_worker.py``).  Each request keeps its stage's own timeout, which for the first one
includes the import.  A probe that hangs past its timeout, or crashes the worker (a native fault, an
exit), is reported against its stage as ``timed_out`` or ``crashed``, exactly as a one-shot probe
would be, and the worker is killed with its process group; the next request starts a new one.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from envbuild.report.redact import redact_tail_text, redact_text
from envbuild.validate.probe import PROBES_DIR, ProbeResult, probe_path
from envbuild.validate.run_output import StreamBuffer
from envbuild.validate.run_tree import SPAWN_LOCK, protect, unprotect

ANSWER_MAX = 8 << 20  # one answer line; a larger one is a broken worker
TAIL = 2000
_LIVE: set[TorchWorker] = set()  # for the SIGINT/SIGTERM hook


def kill_workers() -> None:
    """Kill every live worker now (the signal handler's hook); never blocks."""
    for worker in list(_LIVE):
        worker.kill()


class TorchWorker:
    def __init__(self, python: str, env: Mapping[str, str] | None = None) -> None:
        self.python = python
        self.env = {**(os.environ if env is None else env), "PYTHONFAULTHANDLER": "1"}
        self.proc: subprocess.Popen[bytes] | None = None
        self.answers: queue.Queue[bytes | None] = queue.Queue()
        self.stderr = StreamBuffer()
        self.ready: dict[str, Any] | None = None
        self.starts = 0
        self._next_id = 0
        # One request at a time: the extensions stage may call from its background thread while the
        # ladder calls from the main one (see stage_runners._extensions).
        self._calling = threading.Lock()
        self.caller: int | None = None  # the thread whose request runs now (kill_for_thread)

    # -- process --------------------------------------------------------------------------------------

    def _start(self) -> None:
        self.answers = queue.Queue()
        self.stderr = StreamBuffer()
        self.ready = None
        with SPAWN_LOCK:  # no probe run may take the worker for one of its orphans
            self.proc = subprocess.Popen(
                [self.python, str(PROBES_DIR / "probe_worker.py")],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                env=self.env,
                cwd=str(PROBES_DIR),
            )
            protect(self.proc.pid)
        self.starts += 1
        _LIVE.add(self)
        proc = self.proc
        threading.Thread(target=self._read_answers, args=(proc, self.answers), daemon=True).start()
        threading.Thread(target=self._read_stderr, args=(proc, self.stderr), daemon=True).start()

    @staticmethod
    def _read_answers(proc: subprocess.Popen[bytes], answers: queue.Queue[bytes | None]) -> None:
        assert proc.stdout is not None
        with contextlib.suppress(OSError, ValueError):
            while True:
                line = proc.stdout.readline(ANSWER_MAX)
                if not line:
                    break
                answers.put(line)
        answers.put(None)  # end of file: the worker is gone

    @staticmethod
    def _read_stderr(proc: subprocess.Popen[bytes], buffer: StreamBuffer) -> None:
        assert proc.stderr is not None
        fd = proc.stderr.fileno()
        with contextlib.suppress(OSError, ValueError):
            for chunk in iter(lambda: os.read(fd, 1 << 16), b""):
                buffer.feed(chunk)

    def prestart(self) -> None:
        """Start the process now, so it imports torch while other stages run (errors wait for call())."""
        if self.proc is None:
            with contextlib.suppress(OSError):
                self._start()

    def kill(self) -> None:
        proc = self.proc
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                if pipe is not None:
                    pipe.close()
        unprotect(proc.pid)
        self.proc = None
        _LIVE.discard(self)

    def close(self) -> None:
        """End the worker.  It holds no state worth a clean exit (a torch process takes a while to tear
        down), so it is killed with its process group."""
        self.kill()

    # -- requests -------------------------------------------------------------------------------------

    def _failure(self, outcome: str, reason: str, started: float) -> ProbeResult:
        proc = self.proc
        code = proc.poll() if proc is not None else None
        self.kill()
        tail = redact_tail_text(self.stderr.tail.decode("utf-8", errors="replace"), TAIL)
        return ProbeResult(
            outcome,  # type: ignore[arg-type]
            reason=reason,
            returncode=code,
            duration_s=round(time.monotonic() - started, 3),
            stderr_tail=tail,
            facts={"worker": True, "worker_starts": self.starts},
        )

    def _next(self, deadline: float) -> bytes | str | None:
        """The next answer line, None at end of file, or "timeout"."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "timeout"
        try:
            return self.answers.get(timeout=remaining)
        except queue.Empty:
            return "timeout"

    def call(
        self, name: str, args: Mapping[str, Any], timeout_s: float, cwd: Path | None = None
    ) -> ProbeResult:
        """Run probe ``name`` in the worker; the outcomes of :func:`envbuild.validate.probe.run_probe`.

        Calls from several threads run one after the other; the wait counts against ``timeout_s``."""
        started = time.monotonic()
        if not self._calling.acquire(timeout=timeout_s):
            return ProbeResult(
                "timed_out",
                reason=f"probe '{name}' waited {timeout_s:g} s for the warm worker, busy with another stage",
                duration_s=round(time.monotonic() - started, 3),
                facts={"worker": True, "worker_starts": self.starts},
            )
        try:
            self.caller = threading.get_ident()
            return self._call(name, args, timeout_s, cwd, started)  # the deadline counts from started
        finally:
            self.caller = None
            self._calling.release()

    def kill_for_thread(self, ident: int) -> None:
        """Kill the worker if thread ``ident``'s request runs in it now (a background stage cancelled);
        its call then ends as a crash, and the next request starts a new worker."""
        if self.caller == ident:
            self.kill()

    def _call(
        self, name: str, args: Mapping[str, Any], timeout_s: float, cwd: Path | None, started: float
    ) -> ProbeResult:
        deadline = started + timeout_s
        if self.proc is None or self.proc.poll() is not None:
            self.kill()
            try:
                self._start()
            except OSError as exc:
                return ProbeResult("error", reason=f"cannot start {self.python}: {exc.strerror or exc}")
        if self.ready is None:
            line = self._next(deadline)
            if line == "timeout":
                return self._failure(
                    "timed_out", self._timeout_reason(name, timeout_s, "importing torch"), started
                )
            if not isinstance(line, bytes):
                return self._failure("crashed", self._crash_reason(name, "starting"), started)
            try:
                self.ready = json.loads(line)
            except json.JSONDecodeError:
                return self._failure("garbage", f"probe '{name}': the worker printed {line[:200]!r}", started)
        self._next_id += 1
        request = {"id": self._next_id, "script": str(probe_path(name)), "args": dict(args)}
        if cwd is not None:
            request["cwd"] = str(cwd)
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
        except OSError:
            return self._failure("crashed", self._crash_reason(name, "receiving its request"), started)
        line = self._next(deadline)
        if line == "timeout":
            return self._failure("timed_out", self._timeout_reason(name, timeout_s, "running"), started)
        if not isinstance(line, bytes):
            return self._failure("crashed", self._crash_reason(name, "running"), started)
        try:
            answer = json.loads(line)
        except json.JSONDecodeError:
            return self._failure("garbage", f"probe '{name}': the worker answered {line[:200]!r}", started)
        duration = round(time.monotonic() - started, 3)
        facts = {"worker": True, "worker_starts": self.starts}
        if "result" in answer and isinstance(answer["result"], dict):
            return ProbeResult("ok", data=answer["result"], duration_s=duration, facts=facts)
        reason = f"probe '{name}' failed in the worker: {answer.get('error', 'no result')}"
        tail = redact_tail_text(str(answer.get("traceback", "")), TAIL)
        return ProbeResult("crashed", reason=reason, duration_s=duration, stderr_tail=tail, facts=facts)

    def _timeout_reason(self, name: str, timeout_s: float, doing: str) -> str:
        return (
            f"probe '{name}' did not finish within {timeout_s:g} s ({doing} in the warm worker); "
            "the worker was killed with every process it started"
        )

    def _crash_reason(self, name: str, doing: str) -> str:
        proc = self.proc
        code = proc.wait(timeout=5) if proc is not None else None
        if code is not None and code < 0:
            try:
                how = f"killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"killed by signal {-code}"
        else:
            how = f"exited with status {code}"
        lines = [ln for ln in self.stderr.tail.decode("utf-8", errors="replace").splitlines() if ln.strip()]
        last = f": {redact_text(lines[-1].strip())[:300]}" if lines else ""
        return f"probe '{name}' crashed the warm worker while {doing} ({how}){last}"
