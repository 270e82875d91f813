"""Shared by the probe scripts: read arguments from stdin, print the result line.

Probes run in the interpreter under test and may import only the standard library and the packages
being checked (torch, ...): never envbuild or its dependencies.
"""

from __future__ import annotations

import json
import sys
from typing import Any

MARKER = "ENVBUILD-RESULT "


def read_args() -> dict[str, Any]:
    raw = sys.stdin.read()
    return json.loads(raw) if raw.strip() else {}


def emit(result: dict[str, Any]) -> None:
    sys.stdout.flush()
    sys.stdout.write(MARKER + json.dumps(result, default=str) + "\n")
    sys.stdout.flush()


def error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0][:500] if text else type(exc).__name__
