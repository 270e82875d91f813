"""``envbuild report diff`` sees drift (issue 24 item 5): every distribution, declared and transitive, the
hardware facts, stage timings beyond noise, ``--json``; an older report.json without the installed list
says so.

The sympy drift is real: a second environment (a venv that reaches this venv's packages through a .pth
file) holds a sympy 1.13.3 distribution ahead of this venv's 1.14.0, and the real validator runs on both.
Where a test needs hardware this machine does not have (GPUs, another CPU count) or a slower stage, it
edits a copy of a real report (said at each place).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from cli_support import envbuild
from validate_support import cpu_lock

from envbuild.boundary import to_json
from envbuild.report.diff import diff_reports
from envbuild.report.verify import load_report
from envbuild.validate import run_validation

REPO = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((REPO / "docs" / "output.schema.json").read_text(encoding="utf-8"))
SYMPY = metadata.version("sympy")  # torch's dependency: transitive, never declared by the lock


def _drifted_python(root: Path) -> Path:
    """A venv whose own site-packages holds a sympy 1.13.3 distribution, and whose .pth file puts this
    venv's site-packages after it: the packages probe there sees everything this venv has, sympy
    1.13.3 first (the first copy of a name wins, as for imports)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (site / "outer.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    info = site / "sympy-1.13.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sympy\nVersion: 1.13.3\n", encoding="utf-8")
    return python


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A passing run in this venv, and a passing run in an environment with sympy drifted."""
    tmp = tmp_path_factory.mktemp("drift")
    assert SYMPY != "1.13.3"
    lock_file = tmp / "lock.json"
    lock_file.write_text(to_json(cpu_lock(tmp)), encoding="utf-8")
    _, a = run_validation(lock_file, out=tmp / "a", stages=["packages"], workdir=tmp)
    python = _drifted_python(tmp / "drifted")
    _, b = run_validation(lock_file, python=str(python), out=tmp / "b", stages=["packages"], workdir=tmp)
    return a, b


def _edit(src: Path, dest: Path, change: Any) -> Path:
    """A copy of a real report folder, its report.json changed by ``change(data)``."""
    shutil.copytree(src, dest)
    path = dest / "report.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")
    _remanifest(dest)
    return dest


def _remanifest(folder: Path) -> None:
    """MANIFEST.sha256 written again for the edited copy: it stands for a real lot's own run, whose
    manifest matches (``report fleet`` / ``report diff`` check it, issue 36)."""
    names = sorted(p.name for p in folder.iterdir() if p.name != "MANIFEST.sha256")
    lines = [f"{hashlib.sha256((folder / n).read_bytes()).hexdigest()}  {n}\n" for n in names]
    (folder / "MANIFEST.sha256").write_text("".join(lines), encoding="utf-8")


def _stage(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in data["stages"] if s["stage"] == name)


def test_a_transitive_distribution_that_drifted_is_named(runs: tuple[Path, Path]) -> None:
    a, b = runs
    ra, rb = load_report(a), load_report(b)
    assert ra.ok and rb.ok  # both pass: before, the diff saw nothing at all
    installed = ra.stage("packages").facts["installed"]
    assert installed["sympy"] == SYMPY and len(installed) == ra.stage("packages").facts["installed_count"]
    diffs = diff_reports(ra, rb)
    assert f"package sympy: {SYMPY} -> 1.13.3" in diffs
    assert not [d for d in diffs if d.startswith("package ") and "sympy" not in d], diffs
    assert diff_reports(ra, ra) == []

    proc = envbuild("report", "diff", str(a), str(b))
    assert proc.returncode == 1, proc.stderr
    assert f"package sympy: {SYMPY} -> 1.13.3" in proc.stdout.splitlines()

    js = envbuild("report", "diff", str(a), str(b), "--json")
    assert js.returncode == 1
    data = json.loads(js.stdout)
    jsonschema.validate(data, SCHEMA)
    assert data["ok"] is False and data["command"] == "report diff"
    assert {"kind": "package", "name": "sympy", "a": SYMPY, "b": "1.13.3"}.items() <= next(
        c for c in data["changes"] if c["name"] == "sympy"
    ).items()
    assert f"package sympy: {SYMPY} -> 1.13.3" in data["differences"]
    assert data["noise"] == {"min_seconds": 1.0, "min_ratio": 1.5}


def test_an_older_report_without_the_installed_list_says_so(runs: tuple[Path, Path], tmp_path: Path) -> None:
    from envbuild.report.diff import compare_reports  # new in item 5

    a, b = runs
    # a copy of run B as an envbuild before this change wrote it: no "installed" fact
    old = _edit(b, tmp_path / "old", lambda d: _stage(d, "packages")["facts"].pop("installed"))
    result = compare_reports(load_report(a), load_report(old))
    assert [c.text for c in result.changes if c.kind == "package"] == []  # torch, the declared one, agrees
    assert len(result.notes) == 1
    assert "B (" in result.notes[0] and "only the declared packages were compared" in result.notes[0]
    proc = envbuild("report", "diff", str(a), str(old))
    assert proc.returncode == 0 and proc.stdout.startswith("no differences")
    assert "note: B (" in proc.stdout
    data = json.loads(envbuild("report", "diff", str(a), str(old), "--json").stdout)
    assert data["ok"] is True and [f["code"] for f in data["findings"]] == ["I-DIFF-PARTIAL"]
    jsonschema.validate(data, SCHEMA)


def test_hardware_facts_are_compared(runs: tuple[Path, Path], tmp_path: Path) -> None:
    from envbuild.report.diff import compare_reports  # new in item 5

    a, _ = runs

    def gpus(uuid: str, name: str, cpus: int) -> Any:
        def change(d: dict[str, Any]) -> None:
            # this machine has no GPU: the devices facts a GPU run records, written into a copy
            d["stages"].append(
                {
                    "stage": "devices",
                    "status": "passed",
                    "duration_s": 0.1,
                    "facts": {
                        "count": 1,
                        "devices": [
                            {"index": 0, "name": name, "arch": "sm_90", "memory_gib": 139.8, "uuid": uuid}
                        ],
                    },
                }
            )
            d["host"]["cpus"] = cpus

        return change

    one = load_report(_edit(a, tmp_path / "one", gpus("GPU-aaaa", "NVIDIA H200", 16)))
    two = load_report(_edit(a, tmp_path / "two", gpus("GPU-bbbb", "NVIDIA H100 80GB HBM3", 32)))
    diffs = diff_reports(one, two)
    assert "device 0 uuid: GPU-aaaa -> GPU-bbbb" in diffs
    assert "device 0 name: NVIDIA H200 -> NVIDIA H100 80GB HBM3" in diffs
    assert "host cpus: 16 -> 32" in diffs
    assert all(c.kind == "hardware" for c in compare_reports(one, two).changes)


def test_stage_timings_beyond_noise(runs: tuple[Path, Path], tmp_path: Path) -> None:
    from envbuild.report.diff import beyond_noise  # new in item 5

    a, _ = runs
    assert beyond_noise(10.0, 16.0) and beyond_noise(2.0, 3.5)
    assert not beyond_noise(0.2, 0.9)  # 4x, but under 1 s apart
    assert not beyond_noise(60.0, 63.0)  # 3 s, but 5 %
    assert not beyond_noise(2.0, 3.0)  # 1 s apart exactly, not more

    def took(seconds: float) -> Any:
        def change(d: dict[str, Any]) -> None:
            _stage(d, "packages")["duration_s"] = seconds  # a slower machine, written into a copy

        return change

    fast = load_report(_edit(a, tmp_path / "fast", took(2.0)))
    slow = load_report(_edit(a, tmp_path / "slow", took(5.0)))
    same = load_report(_edit(a, tmp_path / "same", took(2.6)))
    assert diff_reports(fast, slow) == ["stage packages took 2.00 s -> 5.00 s"]
    assert diff_reports(fast, same) == []
