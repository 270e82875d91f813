"""Run one probe script in the interpreter under test, with a timeout, through the process runner.

A probe reads one JSON object (its arguments) on stdin and prints its result as one line
``ENVBUILD-RESULT <json>`` on stdout.  Everything else it prints (warnings, compiler chatter) is kept
as a bounded tail for the report.  The outcome is classified: ``ok``, ``crashed`` (killed by a signal or
a non-zero exit), ``timed_out`` (killed with every process it started), ``garbage`` (no parseable
result) or ``error`` (the interpreter could not be started at all).  :mod:`envbuild.validate.runner`
starts, reads, times out and kills; :attr:`ProbeResult.facts` carries what it reports (dropped output
bytes, stragglers killed, the kill mechanism).
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from envbuild.report.redact import redact_tail_text, redact_text
from envbuild.validate.run_output import MARKER_LINE_MAX
from envbuild.validate.run_tree import kill_current as kill_current
from envbuild.validate.runner import RunResult, run_process

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
    facts: dict[str, Any] = field(default_factory=dict)  # the runner's: dropped bytes, stragglers, kill


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
    return redact_tail_text(raw.decode("utf-8", errors="replace"), TAIL_CHARS)


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
    return run_probe_argv(
        name,
        [python, "-u", str(probe_path(name))],
        timeout_s,
        stdin=json.dumps(dict(args)).encode(),
        env={**(os.environ if env is None else env), "PYTHONFAULTHANDLER": "1"},  # native crash -> stack
        cwd=cwd,
    )


def run_probe_argv(
    name: str,
    argv: list[str],
    timeout_s: float,
    *,
    stdin: bytes = b"",
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> ProbeResult:
    """Run probe ``name`` as ``argv`` (an interpreter with the script, or a program that runs it, such
    as Blender) and classify how it ended; never raises for a misbehaving probe."""
    try:
        run = run_process(
            argv, timeout_s=timeout_s, stdin=stdin, env=env, cwd=cwd, marker=RESULT_MARKER.encode()
        )
    except OSError as exc:
        return ProbeResult("error", reason=f"cannot start {argv[0]}: {exc.strerror or exc}")
    if run.timed_out:
        return ProbeResult(
            "timed_out",
            reason=(
                f"probe '{name}' did not finish within {timeout_s:g} s; killed with every process it started"
            ),
            returncode=run.returncode,
            duration_s=run.duration_s,
            stdout_tail=_tail(run.stdout.tail),
            stderr_tail=_tail(run.stderr.tail),
            facts=run.facts(),
        )
    return _classify(name, run)


def _classify(name: str, run: RunResult) -> ProbeResult:
    rc = run.returncode
    common: dict[str, Any] = {
        "returncode": rc,
        "duration_s": run.duration_s,
        "stdout_tail": _tail(run.stdout.tail),
        "stderr_tail": _tail(run.stderr.tail),
        "facts": run.facts(),
    }
    if rc is None:  # pragma: no cover - the main process would not die (uninterruptible sleep)
        return ProbeResult("crashed", reason=f"probe '{name}' could not be killed", **common)
    if rc < 0:  # the faulthandler's stack (if any) is in stderr_tail
        return ProbeResult("crashed", reason=f"probe '{name}' killed by {_signal_name(-rc)}", **common)
    data: dict[str, Any] | None = None
    if run.marker_line is not None:
        try:
            parsed = json.loads(run.marker_line[len(RESULT_MARKER) :].decode("utf-8", errors="replace"))
        except json.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict):
            data = parsed
    if rc != 0:
        reason = f"probe '{name}' exited with status {rc}"
        return ProbeResult("crashed", data=data or {}, reason=reason + _last_line(run.stderr.tail), **common)
    if data is None:
        if run.marker_overflow:
            limit = MARKER_LINE_MAX // (1024 * 1024)
            reason = f"probe '{name}' printed a result line over {limit} MiB"
            return ProbeResult("garbage", reason=reason, **common)
        head = run.stdout.head.decode("utf-8", errors="replace")
        shown = redact_text(redact_text(head.strip())[:200]) or "(empty output)"
        return ProbeResult("garbage", reason=f"probe '{name}' printed no JSON result: {shown}", **common)
    return ProbeResult("ok", data=data, **common)


def _last_line(err: bytes) -> str:
    lines = [ln for ln in err.decode("utf-8", errors="replace").splitlines() if ln.strip()]
    return f": {redact_text(lines[-1].strip())[:300]}" if lines else ""
