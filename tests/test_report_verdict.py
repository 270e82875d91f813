"""A report's verdict is derived from its stages, never taken from its stored ``ok`` (issue 36, finding
7).  The attacker's input: three reports saying ``"ok": true`` with ``performance: failed`` and the
manifest recomputed (so ``report verify``'s integrity check holds).  Before: ``report fleet`` said "all
3 lots passed" and ``report verify`` said "intact", with nothing else.  The reports are real validator
runs on this machine, each copy edited as said."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cli_support import envbuild, environ
from validate_support import cpu_lock

from envbuild.boundary import to_json
from envbuild.validate import run_validation

SLOW = {"stage": "performance", "status": "failed", "duration_s": 1.0, "facts": {}, "error": "matmul bf16: "
        "412 TFLOP/s, under 0.70 of the 769 healthy H200s achieve"}  # fmt: skip


def _envbuild(*args: str) -> subprocess.CompletedProcess[str]:
    return envbuild(*args, env=environ(COLUMNS="1000"))


def _remanifest(folder: Path) -> None:
    names = sorted(p.name for p in folder.iterdir() if p.name != "MANIFEST.sha256")
    lines = [f"{hashlib.sha256((folder / n).read_bytes()).hexdigest()}  {n}\n" for n in names]
    (folder / "MANIFEST.sha256").write_text("".join(lines), encoding="utf-8")


def _edited(src: Path, dest: Path, change: Any, manifest: bool = True) -> Path:
    shutil.copytree(src, dest)
    data = json.loads((dest / "report.json").read_text(encoding="utf-8"))
    change(data)
    (dest / "report.json").write_text(json.dumps(data), encoding="utf-8")
    if manifest:
        _remanifest(dest)
    return dest


def _says_ok_but_failed(data: dict[str, Any]) -> None:
    data["stages"].append(SLOW)
    assert data["ok"] is True and data["first_failure"] is None  # left as they were: "passed"


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("verdict")
    lock_file = tmp / "lock.json"
    lock_file.write_text(to_json(cpu_lock(tmp)), encoding="utf-8")
    report, run_dir = run_validation(lock_file, out=tmp / "runs", stages=["packages"], workdir=tmp)
    assert report.ok
    return run_dir


@pytest.fixture
def forged(honest: Path, tmp_path: Path) -> list[Path]:
    return [_edited(honest, tmp_path / f"lot-{n}", _says_ok_but_failed) for n in range(3)]


def test_report_fleet_derives_the_verdict_and_flags_the_stored_one(forged: list[Path]) -> None:
    proc = _envbuild("report", "fleet", *map(str, forged))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "all 3 lots passed" not in proc.stdout and "3 of 3 lots did not pass" in proc.stdout
    assert (
        "report: not counted as a pass: report.json says ok: true, but stage performance failed"
        in proc.stdout
    )
    data = json.loads(_envbuild("report", "fleet", *map(str, forged), "--json").stdout)
    assert not data["ok"] and [lot["verdict"] for lot in data["lots"]] == ["FAILED"] * 3
    assert all("first failed stage performance: matmul bf16" in lot["first_failure"] for lot in data["lots"])


def test_report_fleet_checks_each_manifest(honest: Path, forged: list[Path], tmp_path: Path) -> None:
    """A lot edited after its manifest was written (ok kept, a stage failed): the manifest check names
    it, as report verify does, and it is not a pass."""
    stale = _edited(honest, tmp_path / "stale", _says_ok_but_failed, manifest=False)
    proc = _envbuild("report", "fleet", str(honest), str(forged[0]), str(stale), "--json")
    lots = {lot["lot"]: lot for lot in json.loads(proc.stdout)["lots"]}
    assert proc.returncode == 1
    assert lots[honest.name]["verdict"] == "PASSED" and lots["stale"]["verdict"] == "FAILED"
    assert "MANIFEST.sha256: changed: report.json" in lots["stale"]["first_failure"]


def test_report_verify_says_the_stored_verdict_disagrees(forged: list[Path]) -> None:
    proc = _envbuild("report", "verify", str(forged[0]))
    assert proc.returncode == 1, proc.stdout
    assert (
        "error: E-REPORT-VERDICT: report.json says ok: true, but stage performance failed: the verdict is "
        "FAILED, derived from its stages" in proc.stdout
    )
    assert "intact (every file matches MANIFEST.sha256)" in proc.stdout  # the integrity itself holds
    data = json.loads(_envbuild("report", "verify", str(forged[0]), "--json").stdout)
    assert not data["ok"] and data["integrity"] is True
    assert [f["code"] for f in data["findings"]] == ["E-REPORT-VERDICT"]


def test_report_diff_compares_derived_verdicts(honest: Path, forged: list[Path]) -> None:
    proc = _envbuild("report", "diff", str(honest), str(forged[0]))
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert "result: passed -> failed" in lines and "stage performance: absent -> failed" in lines
    assert any(
        line.startswith(f"warning: W-REPORT-UNVERIFIED: B ({forged[0]}): report.json says ok: true")
        for line in lines
    ), lines
    # the same forgery twice: no difference between them, and each still flagged, never a pass
    same = _envbuild("report", "diff", str(forged[0]), str(forged[1]), "--json")
    data = json.loads(same.stdout)
    assert same.returncode == 0 and data["differences"] == []
    assert [f["code"] for f in data["findings"]] == ["W-REPORT-UNVERIFIED"] * 2
