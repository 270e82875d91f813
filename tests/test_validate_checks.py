"""The ``checks`` stage: argv commands with real subprocesses, timeouts and expectations."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from envbuild.boundary import parse
from envbuild.models import CheckSpec
from envbuild.validate.checks import run_checks

PY = sys.executable


def _check(code: str, **kw: object) -> CheckSpec:
    return parse(CheckSpec, {"name": "pilot", "run": [PY, "-c", code], **kw})


def test_passing_check_with_files_and_json(tmp_path: Path) -> None:
    code = (
        "import json, os; os.makedirs('out', exist_ok=True);"
        "json.dump({'counts': {'total': 12, 'rejected': 1}, 'ok': True}, open('out/summary.json', 'w'));"
        "print('done')"
    )
    check = _check(
        code,
        expect_files=["out/summary.json"],
        expect_json={"out/summary.json:counts.total": 12, "out/summary.json:ok": True},
    )
    res = run_checks((check,), tmp_path)
    assert res.status == "passed", res.error
    (entry,) = res.facts["checks"]
    assert entry["output_tail"].strip() == "done" and entry["returncode"] == 0


def test_every_unmet_expectation_is_listed(tmp_path: Path) -> None:
    code = (
        "import json, sys; open('empty.txt', 'w').close();"
        "json.dump({'counts': {'total': 11, 'rejected': 1}, 'flag': 1}, open('s.json', 'w')); sys.exit(2)"
    )
    check = _check(
        code,
        expect_files=["empty.txt", "missing.txt"],
        expect_json={"s.json:counts.total": 12, "s.json:counts.lost": 0, "s.json:flag": True},
    )
    res = run_checks((check,), tmp_path)
    assert res.status == "failed"
    assert res.error == (
        "check 'pilot': exit status 2, expected 0; expected file empty.txt is empty; "
        "expected file missing.txt does not exist; s.json: counts.total is 11, expected 12; "
        "s.json: key counts.lost is absent (expected 0); s.json: flag is 1, expected True"
    )


PILOT = (
    "import json, os; os.makedirs('out', exist_ok=True);"
    "json.dump({'counts': {'total': 12}}, open('out/summary.json', 'w'))"
)
EXPECT = {"expect_files": ["out/summary.json"], "expect_json": {"out/summary.json:counts.total": 12}}


def test_a_previous_runs_file_does_not_pass(tmp_path: Path) -> None:
    """Issue 24: after one good run the pilot was replaced with print("did nothing"), and the previous
    run's summary.json still satisfied expect_files and expect_json."""
    assert run_checks((_check(PILOT, **EXPECT),), tmp_path).status == "passed"
    summary = tmp_path / "out" / "summary.json"
    kept = summary.read_bytes()
    res = run_checks((_check("print('did nothing')", **EXPECT),), tmp_path)
    assert res.status == "failed"
    assert res.error == (
        "check 'pilot': expected file out/summary.json is stale: unchanged since before the check (same "
        "inode, mtime and size): not written during its run; out/summary.json: counts.total is read from "
        "a stale file (unchanged since before the check (same inode, mtime and size): not written during "
        "its run)"
    )
    assert summary.read_bytes() == kept  # the user's file is left where it was
    (entry,) = res.facts["checks"]
    assert [(a["kind"], a["target"], a["ok"]) for a in entry["assertions"]] == [
        ("exit", "exit status", True),
        ("file", "out/summary.json", False),
        ("json", "out/summary.json:counts.total", False),
    ]
    assert entry["assertions"][2]["actual"] == 12 and entry["assertions"][2]["expected"] == 12


def test_a_file_written_again_with_the_same_bytes_passes(tmp_path: Path) -> None:
    assert run_checks((_check(PILOT, **EXPECT),), tmp_path).status == "passed"
    res = run_checks((_check("import time; time.sleep(0.05);" + PILOT, **EXPECT),), tmp_path)
    assert res.status == "passed", res.error


def test_assertions_are_recorded_with_expected_and_actual(tmp_path: Path) -> None:
    res = run_checks((_check(PILOT, **EXPECT),), tmp_path)
    (entry,) = res.facts["checks"]
    assert entry["assertions"] == [
        {"kind": "exit", "target": "exit status", "expected": 0, "actual": 0, "ok": True},
        {
            "kind": "file",
            "target": "out/summary.json",
            "expected": "a non-empty file written during the check",
            "actual": f"written, {(tmp_path / 'out' / 'summary.json').stat().st_size} bytes",
            "ok": True,
        },
        {"kind": "json", "target": "out/summary.json:counts.total", "expected": 12, "actual": 12, "ok": True},
    ]
    assert entry["argv"] == [PY, "-c", PILOT] and entry["returncode"] == 0 and entry["seconds"] > 0
    assert entry["stragglers_killed"] == 0 and res.facts["warnings"] == []


def test_a_check_that_leaves_a_process_behind_is_a_warning(tmp_path: Path) -> None:
    code = "import subprocess; subprocess.Popen(['sleep', '60'], start_new_session=True); print('started')"
    res = run_checks((_check(code),), tmp_path)
    assert res.status == "passed"
    assert res.facts["checks"][0]["stragglers_killed"] == 1
    assert res.facts["warnings"] == [
        "check 'pilot' left 1 process running after it exited (killed by envbuild); a job that leaves "
        "processes behind leaks them on a real run"
    ]
    assert res.hint == res.facts["warnings"][0]


def test_a_failed_check_shows_its_exit_status_and_last_line_first(tmp_path: Path) -> None:
    code = "import sys; print('loading'); sys.exit('ValueError: config/pilot.json has no key lr')"
    res = run_checks((_check(code),), tmp_path)
    assert res.error == (
        "check 'pilot': exit status 1, expected 0 (last output line: ValueError: config/pilot.json has "
        "no key lr)"
    )


def test_check_timeout_kills_it(tmp_path: Path) -> None:
    res = run_checks((_check("import time; time.sleep(60)", timeout_s=1),), tmp_path)
    assert res.status == "timed_out"
    assert res.error == "check 'pilot': did not finish within 1 s; killed"


def test_missing_program_and_no_shell(tmp_path: Path) -> None:
    check = CheckSpec(name="x", run=("no-such-program-envbuild", "; rm -rf /"))
    res = run_checks((check,), tmp_path)
    assert res.status == "failed"
    assert res.error is not None and res.error.startswith("check 'x': cannot run 'no-such-program-envbuild'")


def test_output_tail_is_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVBUILD_TEST_API_KEY", "sk-verysecretvalue-123")
    res = run_checks((_check("import os; print('key', os.environ['ENVBUILD_TEST_API_KEY'])"),), tmp_path)
    tail = res.facts["checks"][0]["output_tail"]
    assert "sk-verysecretvalue-123" not in tail and "[REDACTED]" in tail


def test_no_checks_is_skipped_with_reason(tmp_path: Path) -> None:
    res = run_checks((), tmp_path)
    assert res.status == "skipped" and res.facts["reason"] == "the lock declares no checks"
