"""The one way the tests run the command line.

- :func:`invoke`: in this process, as ``envbuild ARGS`` would run (for tests that need no subprocess):
  exit status, stdout and stderr captured.
- :func:`envbuild`: ``python -m envbuild ARGS`` in a subprocess (a cold start, as a user runs it), its
  environment passed explicitly (:func:`environ` by default) and a timeout always.
- :data:`ENVBUILD`: the argv prefix, for the few tests that drive the process themselves
  (``subprocess.Popen``: a signal mid-run, a stream read line by line).
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

from envbuild.cli import run

ENVBUILD: tuple[str, ...] = (sys.executable, "-m", "envbuild")
REPO = Path(__file__).resolve().parent.parent


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


def environ(**overlay: str) -> dict[str, str]:
    """This process's environment, ``PIP_RETRIES=0`` (the PyTorch index is unreachable here: pip must
    not wait on it), then ``overlay``."""
    return {**os.environ, "PIP_RETRIES": "0", **overlay}


def envbuild(
    *args: str | Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 120,
    python: Sequence[str] = (),
) -> subprocess.CompletedProcess[str]:
    """``python [PYTHON] -m envbuild ARGS`` in a subprocess; its output captured as text, its exit status
    left to the caller.  ``env`` is the child's whole environment (default: :func:`environ`); the child is
    killed after ``timeout`` seconds (``subprocess.TimeoutExpired``), so a hang fails the test."""
    return subprocess.run(
        [sys.executable, *python, "-m", "envbuild", *map(str, args)],
        capture_output=True,
        text=True,
        env=dict(environ() if env is None else env),
        cwd=cwd,
        timeout=timeout,
        check=False,
    )


def check_pytorch(*args: str) -> subprocess.CompletedProcess[str]:
    """``envbuild check pytorch ARGS`` in a subprocess (a cold start, as a user runs it)."""
    return envbuild("check", "pytorch", *args)
