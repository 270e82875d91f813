# mypy: disable-error-code="import-not-found"
"""The warm probe worker: imports torch once, then runs probe scripts on request, in this process.

Protocol (one JSON object a line): the validator writes ``{"id", "script", "args", "cwd"}`` on stdin;
the worker answers ``{"id", "result"}`` (what the probe emitted) or ``{"id", "error"}`` on its private
copy of stdout.  File descriptor 1 is pointed at stderr first, so whatever a probe or a C library
prints cannot corrupt an answer.  The first line is ``{"ready": ...}`` once torch is imported (or
failed to: each probe then reports that itself).  A probe that hangs or crashes takes the worker
with it; the validator reports it against the stage and starts a new worker for the next one.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import runpy
import sys
import time
import traceback

import _probe_common as common

answers = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
requests = os.fdopen(os.dup(0), "r", encoding="utf-8")
os.dup2(2, 1)
with open(os.devnull, "rb") as null:
    os.dup2(null.fileno(), 0)
sys.stdout = sys.stderr


class Capture(io.TextIOBase):
    """A probe's stdout: passed on to stderr, its last ``ENVBUILD-RESULT`` line kept (a probe that
    prints its result itself, as one-shot probes and test stand-ins do)."""

    def __init__(self) -> None:
        self.pending = ""
        self.result: str | None = None

    def write(self, text: str) -> int:
        sys.stderr.write(text)
        self.pending += text
        *lines, self.pending = self.pending.split("\n")
        for line in lines:
            if line.startswith(common.MARKER):
                self.result = line[len(common.MARKER) :]
        if len(self.pending) > (8 << 20):
            self.pending = ""
        return len(text)

    def flush(self) -> None:
        sys.stderr.flush()


started = time.perf_counter()
ready: dict[str, object] = {"ready": True}
try:
    import torch

    ready["torch"] = str(torch.__version__)
    # What torch.optim imports at its first step: a cost of importing torch, not of any probe.
    with contextlib.suppress(Exception):
        import torch._dynamo
except Exception as exc:  # each probe reports a broken torch itself
    ready["torch_error"] = common.error_text(exc)
ready["import_seconds"] = round(time.perf_counter() - started, 3)
answers.write(json.dumps(ready) + "\n")

home = os.getcwd()
for line in requests:
    if not line.strip():
        continue
    request = json.loads(line)
    args = request.get("args") or {}
    common.WORKER = {"args": args, "result": None}
    capture = Capture()
    sys.stdout, sys.stdin = capture, io.StringIO(json.dumps(args))  # as a one-shot probe sees them
    answer: dict[str, object] = {"id": request["id"]}
    try:
        os.chdir(request.get("cwd") or home)
        try:
            runpy.run_path(request["script"], run_name="__main__")
        except SystemExit as exc:  # a probe may end with sys.exit(0) once it has emitted
            if exc.code not in (0, None):
                raise
        result = common.WORKER["result"]
        if result is None and capture.result is not None:
            result = json.loads(capture.result)
        if result is None and capture.pending.startswith(common.MARKER):
            result = json.loads(capture.pending[len(common.MARKER) :])
        if result is None:
            answer["error"] = "the probe emitted no result"
        else:
            answer["result"] = result
    except SystemExit as exc:
        answer["error"] = f"the probe exited with status {exc.code}"
    except BaseException as exc:
        answer["error"] = common.error_text(exc)
        answer["traceback"] = traceback.format_exc()[-2000:]
    finally:
        common.WORKER = None
        sys.stdout, sys.stdin = sys.stderr, sys.__stdin__
        os.chdir(home)
    answers.write(json.dumps(answer, default=str) + "\n")
