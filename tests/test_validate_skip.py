"""``envbuild validate --skip STAGE`` (issue 24 item 7): the stage is recorded as skipped, with every
stage that needs it, each saying why; nothing of theirs runs."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from cli_support import envbuild
from validate_support import cpu_lock

from envbuild.boundary import to_json
from envbuild.errors import UsageError
from envbuild.validate import run_validation
from envbuild.validate.stages import STAGE_NAMES, skip_reasons


def test_a_skipped_stage_takes_every_stage_that_needs_it() -> None:
    assert skip_reasons(STAGE_NAMES, ["extensions"]) == {"extensions": "skipped by --skip"}
    assert skip_reasons(STAGE_NAMES, ["compute"]) == {
        "compute": "skipped by --skip",
        "extensions": "needs stage 'compute', skipped by --skip",
        "checkpoint": "needs stage 'compute', skipped by --skip",
        "performance": "needs stage 'compute', skipped by --skip",
    }
    assert skip_reasons(STAGE_NAMES, ["devices", "checks"]) == {
        "devices": "skipped by --skip",
        "compute": "needs stage 'devices', skipped by --skip",
        "extensions": "needs stage 'compute', skipped because of --skip devices",
        "memory": "needs stage 'devices', skipped by --skip",
        "checkpoint": "needs stage 'compute', skipped because of --skip devices",
        "performance": "needs stage 'compute', skipped because of --skip devices",
        "checks": "skipped by --skip",
    }
    assert skip_reasons(["os", "interpreter"], ["blender", "interpreter"]) == {
        "interpreter": "skipped by --skip"
    }  # only selected stages are listed
    with pytest.raises(UsageError, match="--skip: unknown stage 'extension'"):
        skip_reasons(STAGE_NAMES, ["extension"])


def test_skipped_stages_are_reported_and_never_run(tmp_path: Path) -> None:
    ran: list[str] = []
    report, run_dir = run_validation(
        cpu_lock(tmp_path),
        out=tmp_path / "runs",
        stages=["os", "packages"],
        skip=["interpreter"],
        workdir=tmp_path,
        on_result=lambda r: ran.append(r.stage),
    )
    assert report.ok and report.stage_reached == "os"
    got = {s.stage: (s.status, s.duration_s, s.facts) for s in report.stages}
    assert got == {
        "interpreter": ("skipped", 0.0, {"reason": "skipped by --skip", "skipped_by": "--skip"}),
        "os": got["os"],
        "packages": (
            "skipped",
            0.0,
            {"reason": "needs stage 'interpreter', skipped by --skip", "skipped_by": "--skip"},
        ),
    }
    assert got["os"][0] == "passed" and ran == ["interpreter", "os", "packages"]
    md = (run_dir / "report.md").read_text()
    assert "| packages | skipped | 0.00 | needs stage 'interpreter', skipped by --skip |" in md
    cases = {c.get("name"): c for c in ET.parse(run_dir / "junit.xml").getroot().iter("testcase")}
    skipped = cases["packages"].find("skipped")
    assert skipped is not None and "needs stage 'interpreter'" in str(skipped.get("message"))


def test_cli_skip_is_repeatable_and_refuses_an_unknown_stage(tmp_path: Path) -> None:
    lock = tmp_path / "envbuild.lock.json"
    lock.write_text(to_json(cpu_lock(tmp_path)), encoding="utf-8")
    base = ("validate", "--lock", lock, "--out", tmp_path / "runs")
    proc = envbuild(
        *base, "--stages", "os,packages", "--skip", "interpreter", "--skip", "container", "--json"
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    report = data.get("report", data)  # the report itself, or inside the CLI's JSON envelope
    statuses = {s["stage"]: (s["status"], s["facts"].get("reason")) for s in report["stages"]}
    assert statuses["interpreter"] == ("skipped", "skipped by --skip")
    assert statuses["packages"] == ("skipped", "needs stage 'interpreter', skipped by --skip")
    assert "container" not in statuses  # not selected: --skip names it, nothing to record
    proc = envbuild(*base, "--skip", "extension")
    assert proc.returncode == 2 and "--skip: unknown stage 'extension'" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(list((tmp_path / "runs").iterdir())) == 1  # refused before a second report folder is made
