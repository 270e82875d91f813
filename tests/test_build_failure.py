"""``first_compiler_error`` (envbuild/image/build.py): the line ``envbuild build`` quotes from a failed step's
output as ``first compiler error: ...``, read from a real g++ run on this machine (tmp_path) and from a
hand-written nvcc-style line.  The docker test in tests/test_source_build.py shows it in a failed build.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from envbuild.image.build import first_compiler_error

# Two errors: the first is the one quoted (g++ prints an "In function ..." context line before it).
BROKEN_CPP = """\
#include <vector>

int add_one(int x) {
  return x + eb_not_declared;
}

int twice(int x) { return x * eb_also_missing; }
"""


def gxx(tmp_path: Path, source: str, *flags: str) -> subprocess.CompletedProcess[str]:
    compiler = shutil.which("g++")
    assert compiler, "g++ is needed (the validator's extension tests use it too)"
    path = tmp_path / "addop.cpp"
    path.write_text(source, encoding="utf-8")
    return subprocess.run(
        [compiler, *flags, "-c", str(path), "-o", str(tmp_path / "addop.o")],
        capture_output=True,
        text=True,
        env={**os.environ, "LC_ALL": "C"},  # ASCII quotes, English text, as in the build containers
        check=False,
    )


def test_the_first_gxx_error_is_quoted_with_its_file_line_and_column(tmp_path: Path) -> None:
    proc = gxx(tmp_path, BROKEN_CPP)
    assert proc.returncode == 1, proc.stderr  # g++: a compile error
    lines = proc.stderr.splitlines()
    assert any(": In function " in line for line in lines), proc.stderr  # the context line, skipped
    hint = first_compiler_error(lines)
    assert hint.startswith(f"first compiler error: {tmp_path / 'addop.cpp'}:4:14: error: "), hint
    assert "eb_not_declared" in hint and "eb_also_missing" not in hint
    assert hint.endswith("\n") and hint.count("\n") == 1


def test_warnings_alone_are_no_compiler_error(tmp_path: Path) -> None:
    proc = gxx(tmp_path, "int f() { int unused = 1; return 0; }\n", "-Wall")
    assert proc.returncode == 0 and ": warning: " in proc.stderr, proc.stderr
    assert first_compiler_error(proc.stderr.splitlines()) == ""


def test_an_nvcc_error_is_quoted() -> None:
    # Hand-written in nvcc's format (file(line): error: ...), not captured: no nvcc on this machine.
    lines = [
        '/tmp/pip-req-build-x/csrc/kernel.cu(12): error: identifier "eb_not_declared" is undefined',
        '1 error detected in the compilation of "/tmp/pip-req-build-x/csrc/kernel.cu".',
    ]
    assert first_compiler_error(lines) == (
        'first compiler error: /tmp/pip-req-build-x/csrc/kernel.cu(12): error: identifier "eb_not_declared" '
        "is undefined\n"
    )
