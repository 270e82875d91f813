"""Running a vendor tool (``nvidia-smi``, ``amd-smi``, ``rocm-smi``): the one runner the live reading
(:mod:`envbuild.hardware.live`) and the validator's tool facts (:mod:`envbuild.validate.host`) share.

:func:`run_tool` never raises for the tool's sake: a tool that is not on PATH, cannot start, hangs past
its timeout or exits non-zero is a :class:`ToolResult` saying which, with one line (:attr:`ToolResult.error`)
naming the command and, for a non-zero exit, the last line the tool printed.  That line is the
machine's text, kept as printed: it is made safe where it reaches a terminal or a report
(:mod:`envbuild.untrusted`), not here.  Output that is not UTF-8 is decoded with replacement
characters rather than failing the reading.  A tool that hangs is killed with its process group (its
own children too), so a timed-out reading leaves nothing running.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Literal

TOOL_TIMEOUT_S = 30.0
TAIL_CHARS = 300  # the most of the tool's last line an error carries

ToolStatus = Literal["ok", "not found", "timed out", "failed"]


@dataclass(frozen=True, kw_only=True)
class ToolResult:
    """What running one vendor tool gave: its output (``ok``), or why there is none."""

    argv: tuple[str, ...]
    status: ToolStatus
    output: str | None = None  # standard output, when the tool exited 0
    returncode: int | None = None  # None when it did not start or was killed on its timeout
    error: str | None = None  # one line naming the command; None when ok or not found

    def __post_init__(self) -> None:
        if not self.argv:
            raise ValueError("argv: a tool needs a command")
        if (self.status == "ok") != (self.output is not None):
            raise ValueError(f"output: present exactly when the status is ok (status {self.status!r})")
        if (self.status in ("ok", "not found")) != (self.error is None):
            raise ValueError(f"error: absent exactly when the status is ok or not found ({self.status!r})")

    @property
    def command(self) -> str:
        return " ".join(self.argv)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def last_line(*texts: str) -> str:
    """The last non-blank line of the first text that has one (the tool's stderr, else its stdout),
    cut to :data:`TAIL_CHARS`."""
    for text in texts:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if lines:
            tail = lines[-1]
            return tail if len(tail) <= TAIL_CHARS else tail[: TAIL_CHARS - 3] + "..."
    return ""


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGKILL the tool's process group (it leads its own session), then reap the tool."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with suppress(ProcessLookupError):
        proc.kill()
    proc.wait()
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def run_tool(argv: Sequence[str], *, timeout_s: float = TOOL_TIMEOUT_S) -> ToolResult:
    """Run ``argv`` (no shell, no standard input) and say what it gave; see :class:`ToolResult`."""
    args = tuple(argv)
    command = " ".join(args)
    if not args:
        raise ValueError("run_tool: an empty command")
    if shutil.which(args[0]) is None:
        return ToolResult(argv=args, status="not found")
    try:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,
        )
    except OSError as exc:
        return ToolResult(argv=args, status="failed", error=f"{command}: {exc.strerror or exc}")
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return ToolResult(
            argv=args, status="timed out", error=f"{command} did not answer within {timeout_s:g} s"
        )
    if proc.returncode != 0:
        tail = last_line(err, out)
        return ToolResult(
            argv=args,
            status="failed",
            returncode=proc.returncode,
            error=f"{command} exited {proc.returncode}" + (f": {tail}" if tail else ""),
        )
    return ToolResult(argv=args, status="ok", output=out, returncode=0)


def tool_name(source: str) -> str:
    """The tool a reading's :attr:`~envbuild.models.hardware.HardwareFacts.source` names, as the
    validator's messages say it: ``"nvidia-smi -q -x"`` and ``"nvidia-smi --query-gpu"`` are
    ``nvidia-smi``; ``"amd-smi"``, ``"rocm-smi"`` themselves."""
    return source.split(maxsplit=1)[0] if source.strip() else source
