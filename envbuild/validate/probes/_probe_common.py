"""Shared by the probe scripts: read arguments from stdin, print the result line.

Probes run in the interpreter under test and may import only the standard library and the packages
being checked (torch, ...): never envbuild or its dependencies.
"""

from __future__ import annotations

import json
import sys
from typing import Any

MARKER = "ENVBUILD-RESULT "

# Set by the warm worker (probe_worker.py) while it runs a probe in its own process: the request's
# arguments, and where the probe's result goes, instead of stdin and stdout.
WORKER: dict[str, Any] | None = None


def read_args() -> dict[str, Any]:
    if WORKER is not None:
        return dict(WORKER["args"])
    raw = sys.stdin.read()
    return json.loads(raw) if raw.strip() else {}


def emit(result: dict[str, Any]) -> None:
    if WORKER is not None:
        WORKER["result"] = json.loads(json.dumps(result, default=str))
        return
    sys.stdout.flush()
    sys.stdout.write(MARKER + json.dumps(result, default=str) + "\n")
    sys.stdout.flush()


def error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0][:500] if text else type(exc).__name__
