"""The report room stands on its own (issue 38 item 1): ``envbuild report verify|diff|fleet`` load no
``envbuild.validate`` module.

Each command runs in a fresh interpreter (a subprocess, so nothing this test process imported counts),
on a report written by :func:`envbuild.report.write.write_report`; the interpreter writes the names of
the modules it loaded to a file, which the test reads.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from envbuild.report.folder import MANIFEST, SIGNATURE
from envbuild.report.model import LockRef, Report, StageResult
from envbuild.report.write import write_report

REPO = Path(__file__).resolve().parent.parent

# argv[1]: where to write the loaded modules; the rest: the envbuild command line
RUN = """
import json, sys
from envbuild.cli import cli
try:
    cli.main(args=sys.argv[2:], prog_name="envbuild")
except SystemExit as exc:
    code = exc.code
else:
    code = 0
with open(sys.argv[1], "w", encoding="utf-8") as f:
    json.dump({"code": code, "modules": sorted(sys.modules)}, f)
"""


def a_report(run_dir: Path, lot: str) -> Path:
    report = Report(
        run_id=f"20250101T000000Z-{lot}",
        envbuild_version="0.1.0",
        started_at="2025-01-01T00:00:00+00:00",
        finished_at="2025-01-01T00:00:01+00:00",
        duration_s=1.0,
        python="/opt/venv/bin/python",
        workdir="/workspace",
        lock=LockRef(path="/etc/envbuild/envbuild.lock.json", sha256="0" * 64, content={}),
        stages=(StageResult(stage="os", status="passed", duration_s=0.5, facts={"pretty_name": "Debian"}),),
        first_failure=None,
        stage_reached="os",
        ok=True,
    )
    run_dir.mkdir(parents=True)
    write_report(run_dir, report, {}, {"PATH": "/usr/bin"})
    return run_dir


def loaded(tmp_path: Path, *argv: str) -> tuple[object, list[str]]:
    out = tmp_path / "modules.json"
    proc = subprocess.run(
        [sys.executable, "-c", RUN, str(out), *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.is_file(), proc.stderr
    data = json.loads(out.read_text(encoding="utf-8"))
    return data["code"], data["modules"]


@pytest.mark.parametrize("command", ["verify", "diff", "fleet"])
def test_report_commands_load_no_validate_module(tmp_path: Path, command: str) -> None:
    a = a_report(tmp_path / "runs" / "a", "aaaaaa")
    b = a_report(tmp_path / "runs" / "b", "bbbbbb")
    argv = {"verify": [str(a)], "diff": [str(a), str(b)], "fleet": [str(a), str(b)]}[command]
    code, modules = loaded(tmp_path, "report", command, *argv)
    assert code == 0  # an intact report, two equal ones, two lots that passed alike
    assert "envbuild.report.verify" in modules  # the command ran
    assert [m for m in modules if m == "envbuild.validate" or m.startswith("envbuild.validate.")] == []


def test_the_signature_sits_beside_the_manifest() -> None:
    assert SIGNATURE == MANIFEST + ".sig"
