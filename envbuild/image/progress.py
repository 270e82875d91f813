"""Follow the classic builder's JSON stream: steps, their log lines, the image id, the error.

:class:`BuildStream` is pure (no I/O besides the log file object it is given) so it is tested with
recorded streams; :func:`rich_progress` renders it live (step N/M, instruction, elapsed).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, Any

_STEP_RE = re.compile(r"^Step (\d+)/(\d+) : (.*)$")
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@dataclass
class Step:
    number: int
    total: int
    instruction: str
    started: float
    finished: float | None = None
    cached: bool = False
    lines: list[str] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return (self.finished if self.finished is not None else time.monotonic()) - self.started

    @property
    def title(self) -> str:
        return f"Step {self.number}/{self.total} : {self.instruction}"


class BuildStream:
    """Consume decoded build-stream chunks; keep the steps and write every line to ``log``."""

    def __init__(self, log: IO[str] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.log = log
        self.clock = clock
        self.steps: list[Step] = []
        self.image_id: str | None = None
        self.error: str | None = None
        self.started = clock()
        self._partial = ""

    @property
    def current(self) -> Step | None:
        return self.steps[-1] if self.steps else None

    def feed(self, chunk: dict[str, Any]) -> None:
        if "stream" in chunk:
            self._text(str(chunk["stream"]))
        if "status" in chunk:  # pulls of a base image (not on these machines, but harmless)
            self._line(f"{chunk['status']} {chunk.get('progress', '')}".rstrip())
        aux = chunk.get("aux")
        if isinstance(aux, dict) and isinstance(aux.get("ID"), str):
            self.image_id = aux["ID"]
        if "error" in chunk or "errorDetail" in chunk:
            detail = chunk.get("errorDetail")
            message = detail.get("message") if isinstance(detail, dict) else None
            self.error = str(message or chunk.get("error") or "unknown build error").strip()
            self._flush()
            if self.log is not None:
                self.log.write(f"ERROR: {self.error}\n")

    def close(self) -> None:
        self._flush()
        now = self.clock()
        if self.current is not None and self.current.finished is None and self.error is None:
            self.current.finished = now

    def _text(self, text: str) -> None:
        text = self._partial + _ANSI_RE.sub("", text).replace("\r\n", "\n")
        *lines, self._partial = text.split("\n")
        for line in lines:
            self._line(line.rsplit("\r", 1)[-1])

    def _flush(self) -> None:
        if self._partial:
            line, self._partial = self._partial, ""
            self._line(line)

    def _line(self, line: str) -> None:
        if self.log is not None:
            self.log.write(line + "\n")
        match = _STEP_RE.match(line)
        now = self.clock()
        if match:
            if self.current is not None and self.current.finished is None:
                self.current.finished = now
            self.steps.append(Step(int(match[1]), int(match[2]), match[3].strip(), started=now))
            return
        step = self.current
        if step is None:
            return
        if line.strip() == "---> Using cache":
            step.cached = True
        if line.startswith("Successfully built ") and self.image_id is None:
            self.image_id = line.split()[-1]
        step.lines.append(line)

    def failing_step(self) -> Step | None:
        """The step that was running when the error came (None when it failed before any step)."""
        return self.current if self.error is not None else None

    def tail(self, step: Step, lines: int = 30) -> list[str]:
        useful = [
            line
            for line in step.lines
            if line.strip() and not line.strip().startswith(("---> ", "Removing intermediate container"))
        ]
        return useful[-lines:]


@contextmanager
def rich_progress(stream: BuildStream, label: str, enabled: bool = True) -> Iterator[Callable[[], None]]:
    """Show a live line: spinner, ``Step N/M: instruction``, a bar over the steps, elapsed time.

    Yields a ``refresh()`` to call after each chunk.  Disabled (non-TTY, ``--quiet``) it prints the
    step titles only.
    """
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    console = Console(stderr=True)
    if not enabled or not console.is_terminal:
        printed = 0

        def plain() -> None:
            nonlocal printed
            while printed < len(stream.steps):
                console.print(stream.steps[printed].title, markup=False, highlight=False, soft_wrap=True)
                printed += 1

        yield plain
        return
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}", markup=False),
        BarColumn(bar_width=20),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task(label, total=None)

        def refresh() -> None:
            step = stream.current
            if step is None:
                return
            # The spinner, bar, N/M and elapsed columns keep their room; the tag only fits when wide.
            head = f"{label}  " if console.width >= 100 + len(label) else ""
            room = max(12, console.width - len(head) - 60)
            text = step.instruction if len(step.instruction) <= room else step.instruction[: room - 3] + "..."
            progress.update(
                task,
                description=f"{head}step {step.number}/{step.total}: {text}",
                total=step.total,
                completed=step.number - 1,
            )

        yield refresh
        if stream.error is None and stream.current is not None:
            progress.update(task, completed=stream.current.total, description=f"{label}  done")
