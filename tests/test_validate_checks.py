"""The ``checks`` stage: argv commands with real subprocesses, timeouts and expectations."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from envbuild.models import CheckSpec
from envbuild.typed import parse
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
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "s.json").write_text(json.dumps({"counts": {"total": 11, "rejected": 1}, "flag": 1}))
    check = _check(
        "import sys; sys.exit(2)",
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
