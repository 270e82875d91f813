"""Golden bundles: every built-in profile on its representative targets, compared byte for byte.

Each case renders the whole bundle (Dockerfile, README, lock, requirements-rebuild.txt,
.dockerignore, keep files, app/) and compares it with ``tests/golden/<profile>--<target>/``.
A mismatch shows a unified diff.  After an intended change, regenerate and review the diff:

    ENVBUILD_UPDATE_GOLDEN=1 .venv/bin/pytest tests/test_golden.py

Combinations the check refuses are asserted to be refused (exit 1, nothing written) instead.
``tests/golden/_profiles/`` holds fixture profiles for backends no built-in covers (ROCm).
"""

from __future__ import annotations

import difflib
import os
import shutil
from pathlib import Path

import pytest

from envbuild.errors import IncompatibleError
from envbuild.plan import check
from envbuild.profile import load_profile
from envbuild.render import render_bundle

GOLDEN = Path(__file__).parent / "golden"
REPO = Path(__file__).resolve().parent.parent
UPDATE = os.environ.get("ENVBUILD_UPDATE_GOLDEN") == "1"
FIXTURES = {"pytorch-rocm": "tests/golden/_profiles/pytorch-rocm.toml"}
# Bundle files that are verbatim copies of one of envbuild's own source files: the golden holds a line
# naming the source instead of a copy (a rendered file that differs from its source keeps its bytes, and
# the comparison shows the difference).
VERBATIM = {"envbuild-probe-ops.py": "envbuild/validate/probes/_probe_ops.py"}

CASES = [
    ("ubuntu", "cpu"),
    ("pytorch", "h100"),
    ("pytorch", "b200"),
    ("pytorch", "rtx4090"),
    ("blender", "h100"),
    ("blender", "rtx4090"),
    ("blender", "b200"),
    ("custom", "h100"),
    ("custom", "b200"),
    ("pytorch-cpu", "cpu"),
    ("pytorch-rocm", "mi300x"),
]
REFUSED = [
    ("pytorch", "mi300x", "E-VENDOR"),
    ("custom", "mi300x", "E-VENDOR"),
    ("blender", "mi300x", "E-BLENDER-DEVICE"),
]


def render_case(profile: str, target: str, out: Path) -> Path:
    ref = FIXTURES.get(profile, profile)
    result = check(load_profile(str(REPO / ref) if profile in FIXTURES else ref), targets=[target])
    command = f"envbuild render {ref} --target {target}"  # as `envbuild render` records it: no --out
    return render_bundle(result, out, command=command)


def read_tree(path: Path) -> dict[str, bytes]:
    """All files under ``path``; absolute checkout paths (fixture profiles) become ``<repo>``."""
    files = {}
    for item in sorted(path.rglob("*")):
        if item.is_file():
            rel = item.relative_to(path).as_posix()
            data = item.read_bytes().replace(str(REPO).encode(), b"<repo>")
            source = VERBATIM.get(rel)
            if source is not None and data == (REPO / source).read_bytes():
                data = f"<verbatim copy of {source}>\n".encode()
            files[rel] = data
    return files


def diff(name: str, expected: bytes, actual: bytes) -> str:
    lines = difflib.unified_diff(
        expected.decode(errors="replace").splitlines(keepends=True),
        actual.decode(errors="replace").splitlines(keepends=True),
        fromfile=f"golden/{name}",
        tofile=f"rendered/{name}",
    )
    return "".join(lines)


@pytest.mark.parametrize(("profile", "target"), CASES, ids=[f"{p}--{t}" for p, t in CASES])
def test_golden_bundle(profile: str, target: str, tmp_path: Path) -> None:
    actual = read_tree(render_case(profile, target, tmp_path / "bundle"))
    golden = GOLDEN / f"{profile}--{target}"
    if UPDATE:
        shutil.rmtree(golden, ignore_errors=True)
        for rel, data in actual.items():
            (golden / rel).parent.mkdir(parents=True, exist_ok=True)
            (golden / rel).write_bytes(data)
    assert golden.is_dir(), f"no golden for {golden.name}; run ENVBUILD_UPDATE_GOLDEN=1 pytest {__file__}"
    expected = read_tree(golden)
    assert sorted(actual) == sorted(expected), "the bundle's file list changed"
    problems = [
        diff(name, expected[name], actual[name]) for name in expected if expected[name] != actual[name]
    ]
    assert not problems, "rendered bundle differs from the golden:\n" + "\n".join(problems)


@pytest.mark.parametrize(("profile", "target", "code"), REFUSED, ids=[f"{p}--{t}" for p, t, _ in REFUSED])
def test_incompatible_combination_is_refused(profile: str, target: str, code: str, tmp_path: Path) -> None:
    with pytest.raises(IncompatibleError, match=code):
        render_case(profile, target, tmp_path / "bundle")
    assert list(tmp_path.iterdir()) == []


def test_no_stale_goldens() -> None:
    expected = {f"{p}--{t}" for p, t in CASES}
    present = {p.name for p in GOLDEN.iterdir() if p.is_dir() and not p.name.startswith("_")}
    assert present == expected


def test_rendering_twice_is_byte_identical(tmp_path: Path) -> None:
    a = read_tree(render_case("custom", "h100", tmp_path / "a"))
    b = read_tree(render_case("custom", "h100", tmp_path / "b"))
    assert a == b
