"""Run the command line in this process, as ``envbuild ARGS`` would run (for tests that need no
subprocess): exit status, stdout and stderr captured."""

from __future__ import annotations

import io
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass

from envbuild.cli import run


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str
    exception: BaseException | None = None  # an exception the command let escape (a bug)

    @property
    def output(self) -> str:
        """stdout, then stderr."""
        return self.stdout + self.stderr


def invoke(args: list[str]) -> Result:
    out, err = io.StringIO(), io.StringIO()
    exception: BaseException | None = None
    with redirect_stdout(out), redirect_stderr(err):
        try:
            run(args)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except Exception as exc:
            exception, code = exc, 1
    return Result(code, out.getvalue(), err.getvalue(), exception)


def check_pytorch(*args: str) -> subprocess.CompletedProcess[str]:
    """``envbuild check pytorch ARGS`` in a subprocess (a cold start, as a user runs it)."""
    return subprocess.run(
        [sys.executable, "-m", "envbuild", "check", "pytorch", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
