"""Run one probe script in the interpreter under test, as its own process group, with a timeout.

A probe reads one JSON object (its arguments) on stdin and prints its result as one line
``ENVBUILD-RESULT <json>`` on stdout.  Everything else it prints (warnings, compiler chatter) is kept
as a tail for the report.  The outcome is classified: ``ok``, ``crashed`` (killed by a signal or a
non-zero exit), ``timed_out`` (killed with its whole process group), ``garbage`` (no parseable result)
or ``error`` (the interpreter could not be started at all).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from envbuild.validate.redact import redact_text

RESULT_MARKER = "ENVBUILD-RESULT "
PROBES_DIR = Path(__file__).resolve().parent / "probes"
TAIL_CHARS = 2000

Outcome = Literal["ok", "crashed", "timed_out", "garbage", "error"]


@dataclass
class ProbeResult:
    outcome: Outcome
    data: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    returncode: int | None = None
    duration_s: float = 0.0
    stdout_tail: str = ""
    stderr_tail: str = ""


class _Tracker:
    """The probe running now, so that a signal handler can stop it with its process group."""

    current: subprocess.Popen[bytes] | None = None


def kill_current() -> None:
    proc = _Tracker.current
    if proc is not None and proc.poll() is None:
        _kill_group(proc)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    except PermissionError:  # pragma: no cover - the group leader changed owner
        proc.kill()


def probe_path(name: str) -> Path:
    """The script for probe ``name``; ``ENVBUILD_PROBE_<NAME>`` substitutes another script (a test hook)."""
    override = os.environ.get(f"ENVBUILD_PROBE_{name.upper()}")
    if override:
        return Path(override)
    return PROBES_DIR / f"probe_{name}.py"


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _tail(raw: bytes) -> str:
    return redact_text(raw.decode("utf-8", errors="replace")[-TAIL_CHARS:])


def run_probe(
    python: str,
    name: str,
    args: Mapping[str, Any],
    timeout_s: float,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> ProbeResult:
    """Run probe ``name`` with ``args`` in ``python``; never raises for a misbehaving probe."""
    script = probe_path(name)
    cmd = [python, "-u", str(script)]
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env={**(os.environ if env is None else env), "PYTHONFAULTHANDLER": "1"},  # native crash -> stack
            cwd=str(cwd) if cwd else None,
        )
    except OSError as exc:
        return ProbeResult("error", reason=f"cannot start {python}: {exc.strerror or exc}")
    _Tracker.current = proc
    try:
        try:
            out, err = proc.communicate(json.dumps(dict(args)).encode(), timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            return ProbeResult(
                "timed_out",
                reason=f"probe '{name}' did not finish within {timeout_s:g} s; killed with its process group",
                returncode=proc.returncode,
                duration_s=time.monotonic() - start,
                stdout_tail=_tail(out),
                stderr_tail=_tail(err),
            )
    finally:
        if proc.poll() is None:  # interrupted (KeyboardInterrupt, SIGTERM handler): stop the probe too
            _kill_group(proc)
            proc.wait()
        _Tracker.current = None
    return _classify(name, proc.returncode, out, err, time.monotonic() - start)


def _classify(name: str, rc: int, out: bytes, err: bytes, duration: float) -> ProbeResult:
    text = out.decode("utf-8", errors="replace")
    common: dict[str, Any] = {
        "returncode": rc,
        "duration_s": duration,
        "stdout_tail": _tail(out),
        "stderr_tail": _tail(err),
    }
    if rc < 0:  # the faulthandler's stack (if any) is in stderr_tail
        return ProbeResult("crashed", reason=f"probe '{name}' killed by {_signal_name(-rc)}", **common)
    data: dict[str, Any] | None = None
    for line in reversed(text.splitlines()):
        if line.startswith(RESULT_MARKER):
            try:
                parsed = json.loads(line[len(RESULT_MARKER) :])
            except json.JSONDecodeError:
                break
            if isinstance(parsed, dict):
                data = parsed
            break
    if rc != 0:
        reason = f"probe '{name}' exited with status {rc}"
        return ProbeResult("crashed", data=data or {}, reason=reason + _last_line(err), **common)
    if data is None:
        shown = redact_text(text.strip()[:200]) or "(empty output)"
        return ProbeResult("garbage", reason=f"probe '{name}' printed no JSON result: {shown}", **common)
    return ProbeResult("ok", data=data, **common)


def _last_line(err: bytes) -> str:
    lines = [ln for ln in err.decode("utf-8", errors="replace").splitlines() if ln.strip()]
    return f": {redact_text(lines[-1].strip())[:300]}" if lines else ""
