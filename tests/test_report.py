"""Report folders: manifest verification (tamper, missing, extra), diff, junit/markdown, redaction, CLI."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import replace
from importlib import metadata
from pathlib import Path

import pytest
from cli_support import envbuild
from validate_support import cpu_lock, venv_distributions

from envbuild.boundary import to_json
from envbuild.models import CheckSpec
from envbuild.report import markdown as markdown_report
from envbuild.report.diff import diff_reports
from envbuild.report.redact import REDACTED, redact_env, redact_text
from envbuild.report.verify import load_report, verify_report
from envbuild.validate import run_validation


def _report(tmp_path: Path, name: str, stages: list[str], **lock_update: object) -> Path:
    lock_file = tmp_path / f"{name}.lock.json"
    lock_file.write_text(to_json(cpu_lock(tmp_path, **lock_update)), encoding="utf-8")
    _, run_dir = run_validation(lock_file, out=tmp_path / name, stages=stages, workdir=tmp_path)
    return run_dir


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HF_TOKEN", "hf_reportTestSecretValue42")
    monkeypatch.setenv("PIP_INDEX_URL", "https://user:pa55word@mirror.example/simple")
    return _report(tmp_path, "a", ["interpreter", "os"])


def test_run_folders_are_new_and_never_reused(tmp_path: Path) -> None:
    a = _report(tmp_path, "same", ["os"])
    b = _report(tmp_path, "same", ["os"])
    assert a != b and a.parent == b.parent
    assert len(list(a.parent.iterdir())) == 2


def test_intact_report_verifies(run_dir: Path) -> None:
    assert verify_report(run_dir) == []
    proc = envbuild("report", "verify", str(run_dir))
    assert proc.returncode == 0 and "intact" in proc.stdout
    lines = (run_dir / "MANIFEST.sha256").read_text().splitlines()
    assert [ln.split("  ")[1] for ln in lines] == sorted(
        p.name for p in run_dir.iterdir() if p.name != "MANIFEST.sha256"
    )
    check = subprocess.run(["sha256sum", "-c", "--quiet", "MANIFEST.sha256"], cwd=run_dir, check=False)
    assert check.returncode == 0  # the manifest is in sha256sum's own format


def test_tampered_missing_and_extra_files_fail(run_dir: Path) -> None:
    report = run_dir / "report.json"
    report.write_text(report.read_text().replace('"ok": true', '"ok": false'))
    (run_dir / "os-release").unlink()
    (run_dir / "notes.txt").write_text("added after the run")
    assert verify_report(run_dir) == ["missing: os-release", "changed: report.json", "extra: notes.txt"]
    proc = envbuild("report", "verify", str(run_dir))
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == [
        "error: E-REPORT: missing: os-release",
        "error: E-REPORT: changed: report.json",
        "error: E-REPORT: extra: notes.txt",
        # the stored verdict no longer agrees with the stages (issue 36): said too
        "error: E-REPORT-VERDICT: report.json says ok: false, but every stage passed or was skipped: its "
        "stored verdict disagrees",
    ]


def test_missing_manifest_and_not_a_dir(tmp_path: Path, run_dir: Path) -> None:
    (run_dir / "MANIFEST.sha256").unlink()
    assert verify_report(run_dir) == ["MANIFEST.sha256 is missing (an incomplete or interrupted copy)"]
    proc = envbuild("report", "verify", str(tmp_path / "nope"))
    assert proc.returncode == 1 and "not a report directory" in proc.stderr and "Traceback" not in proc.stderr


def test_damaged_manifest_and_report_json_are_named_not_a_traceback(run_dir: Path) -> None:
    (run_dir / "MANIFEST.sha256").write_bytes(b"\xff\xfe garbage")
    assert verify_report(run_dir) == ["MANIFEST.sha256 is not UTF-8 text (damaged in the copy?)"]
    (run_dir / "report.json").write_bytes(b"\xff{}")
    proc = envbuild("report", "diff", str(run_dir), str(run_dir))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr  # 1 means "different"
    assert f"{run_dir / 'report.json'}: not UTF-8 text" in proc.stderr
    proc = envbuild("report", "diff", str(run_dir / "report.json"), str(run_dir))
    assert proc.returncode == 2 and f"{run_dir / 'report.json'}: not a report directory" in proc.stderr


def test_secrets_never_land_in_the_report(run_dir: Path) -> None:
    env_lines = (run_dir / "env.txt").read_text().splitlines()
    assert "HF_TOKEN=[REDACTED]" in env_lines
    assert "PIP_INDEX_URL=https://***@mirror.example/simple" in env_lines
    for path in run_dir.iterdir():
        text = path.read_text(encoding="utf-8")
        assert "hf_reportTestSecretValue42" not in text and "pa55word" not in text, path.name


def test_report_json_fields_and_junit(run_dir: Path) -> None:
    data = json.loads((run_dir / "report.json").read_text())
    assert data["format"] == "envbuild.report/1"
    assert data["run_id"] == run_dir.name
    assert set(data["lock"]) == {"path", "sha256", "content"}
    assert data["lock"]["content"]["profile_name"] == "pytorch-cpu"
    assert data["stage_reached"] == "os" and data["ok"] is True and data["interrupted"] is False
    assert [s["stage"] for s in data["stages"]] == ["interpreter", "os"]
    suite = ET.parse(run_dir / "junit.xml").getroot()
    assert suite.tag == "testsuite" and suite.get("tests") == "2" and suite.get("failures") == "0"
    assert [c.get("name") for c in suite.iter("testcase")] == ["interpreter", "os"]
    md = (run_dir / "report.md").read_text()
    assert "| os | passed |" in md
    pretty = platform.freedesktop_os_release()["PRETTY_NAME"]
    assert f"- os: {pretty}" in md and f"- interpreter: {sys.executable}" in md


def test_failed_stage_in_junit_and_markdown(tmp_path: Path) -> None:
    run_dir = _report(tmp_path, "b", ["os", "packages"], os_release_id="ubuntu", os_release_version="24.04")
    suite = ET.parse(run_dir / "junit.xml").getroot()
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    failure = cases["os"].find("failure")
    assert failure is not None and failure.get("message") == "OS is debian 12; the lock declares ubuntu 24.04"
    assert cases["packages"].find("skipped") is not None  # aborted after the failure
    md = (run_dir / "report.md").read_text()
    assert "first failure: **os**: OS is debian 12; the lock declares ubuntu 24.04" in md


def test_markdown_lists_the_packages_stage(tmp_path: Path) -> None:
    dists = tuple(
        replace(d, version="1.0.0", required_by=("torch",)) if d.name == "sympy" else d
        for d in venv_distributions()
        if d.name != "mpmath"
    )
    run_dir = _report(tmp_path, "resolved", ["packages"], resolved=True, distributions=dists)
    md = (run_dir / "report.md").read_text()
    section = md[md.index("## Packages") :]
    installed = len(dists) + 1  # + mpmath
    sympy, mpmath = metadata.version("sympy"), metadata.version("mpmath")
    assert section.splitlines()[:3] == [
        "## Packages",
        "",
        f"Compared the whole installed set ({installed} distributions) with the lock's {len(dists)} "
        "resolved distributions: missing 0, different version 1, wrong variant 0, broken requirements 0, "
        "extras 1.",
    ]
    assert f"**Different version** (1):\n\n- sympy {sympy} instead of 1.0.0 (required by torch)\n" in section
    extras = "**Extras (installed, not in the lock; listed, never a failure)** (1):"
    assert f"{extras}\n\n- mpmath {mpmath}\n" in section
    assert "**Missing" not in section and "Note:" not in section
    facts = json.loads((run_dir / "report.json").read_text())["stages"][-1]["facts"]
    assert facts["different"] == [f"sympy {sympy} instead of 1.0.0 (required by torch)"]
    assert facts["extras"] == [f"mpmath {mpmath}"] and facts["lock_resolved"] is True

    unresolved = (_report(tmp_path, "declared", ["packages"]) / "report.md").read_text()
    section = unresolved[unresolved.index("## Packages") :]
    n = len(cpu_lock(tmp_path).packages)
    assert (
        f"> **Note:** the lock is not resolved: only its declared requirements ({n}) were compared" in section
    )
    # the report's text is escaped for Markdown (issue 36): its backticks are shown, not code
    assert "transitive dependencies were not checked (run \\`envbuild lock BUNDLE\\`" in section
    assert (
        f"Compared the lock's declared requirements ({n}) with the " in section
        and "differences 0, broken requirements 0." in section
    )
    assert "| packages | passed | " in unresolved
    assert " |  — hint" not in unresolved and "| hint: the lock is not resolved" in unresolved


def test_markdown_shows_a_failed_checks_output_tail_bounded_and_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_checkOutputSecret77")
    code = (
        "import os, sys\n"
        "for i in range(1, 101): print(f'line {i:03d}')\n"
        "print('token', os.environ['HF_TOKEN']); print('```'); sys.exit(3)"
    )
    checks = (
        CheckSpec(name="noisy", run=("python", "-c", code)),
        CheckSpec(name="fine", run=("python", "-c", "print('ok')")),
    )
    run_dir = _report(tmp_path, "checks", ["checks"], checks=checks)
    md = (run_dir / "report.md").read_text()
    section = md[md.index("## Checks") :]
    assert "### `noisy`: failed" in section and "`fine`" not in section  # passed checks are not repeated
    assert "- error: exit status 3, expected 0" in section
    block = section[section.index("````\n") + 5 : section.rindex("\n````")]  # a fence longer than ```
    lines = block.splitlines()
    assert len(lines) == markdown_report.TAIL_LINES
    assert lines[0] == "line 063" and lines[-3:] == ["line 100", "token [REDACTED]", "```"]
    assert "hf_checkOutputSecret77" not in md
    assert markdown_report.output_tail("x" * 10_000 + "\nend").endswith("end")
    assert len(markdown_report.output_tail("y" * 10_000)) == markdown_report.TAIL_CHARS


def test_diff_two_reports(tmp_path: Path) -> None:
    a = _report(tmp_path, "a", ["packages"])
    base = cpu_lock(tmp_path)
    drifted = tuple(replace(p, version="2.12.0") if p.name == "torch" else p for p in base.packages)
    b = _report(tmp_path, "b", ["packages"], packages=drifted)
    diffs = diff_reports(load_report(a), load_report(b))
    assert "result: passed -> failed" in diffs
    assert "stage packages: passed -> failed" in diffs
    assert any(d.startswith("lock: ") for d in diffs)
    assert diff_reports(load_report(a), load_report(a)) == []
    proc = envbuild("report", "diff", str(a), str(b))
    assert proc.returncode == 1 and "stage packages: passed -> failed" in proc.stdout.splitlines()
    same = envbuild("report", "diff", str(a), str(a))
    assert same.returncode == 0 and same.stdout.strip() == "no differences"


def test_diff_reports_package_and_driver_changes(tmp_path: Path) -> None:
    a = load_report(_report(tmp_path, "a", ["packages"]))
    stages = [
        replace(s, facts={**s.facts, "declared_installed": {"torch": "2.12.0+cpu"}})
        if s.stage == "packages"
        else s
        for s in a.stages
    ]
    b = replace(a, stages=tuple(stages))
    assert diff_reports(a, b) == ["package torch: 2.13.0+cpu -> 2.12.0+cpu"]


def test_redaction_helpers() -> None:
    env = {
        "AWS_SECRET_ACCESS_KEY": "x",
        "HF_TOKEN": "y",
        "HOME": "/root",
        "PIP_INDEX_URL": "postgres://u:p@h/db",
    }
    assert redact_env(env) == {  # AWS_SECRET_ACCESS_KEY: not on env.txt's allow-list
        "HF_TOKEN": REDACTED,
        "HOME": "/root",
        "PIP_INDEX_URL": "postgres://***@h/db",
    }
    assert redact_text("token=abcdef123 ok", {"MY_TOKEN": "abcdef123"}) == f"token={REDACTED} ok"
    assert redact_text("a 1 b", {"MY_TOKEN": "1"}) == "a 1 b"  # too short to scrub from free text


def test_bad_lock_is_exit_2_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "lock.json"
    bad.write_text('{"format": "envbuild.lock/9"}')
    proc = envbuild("validate", "--lock", str(bad), "--out", str(tmp_path / "runs"))
    assert proc.returncode == 2
    assert "expected format envbuild.lock/1" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "runs").exists()  # nothing half-written
    missing = envbuild("validate", "--lock", str(tmp_path / "none.json"))
    assert missing.returncode == 2 and "cannot read lock file" in missing.stderr
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe{}")
    binary = envbuild("validate", "--lock", str(tmp_path / "binary.json"))
    assert binary.returncode == 2 and "binary.json: not UTF-8 text" in binary.stderr
    good = tmp_path / "good.json"
    good.write_text(to_json(cpu_lock(tmp_path)), encoding="utf-8")
    stages = envbuild("validate", "--lock", str(good), "--stages", "os,gpu", "--out", str(tmp_path / "runs"))
    assert stages.returncode == 2 and "--stages: unknown stage 'gpu'" in stages.stderr
    timeout = envbuild(
        "validate", "--lock", str(good), "--timeout", "os=soon", "--out", str(tmp_path / "runs")
    )
    assert timeout.returncode == 2 and "expected STAGE=SECONDS" in timeout.stderr
    assert not (tmp_path / "runs").exists()


def test_python_option_resolution(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(to_json(cpu_lock(tmp_path)), encoding="utf-8")
    bad = envbuild(
        "validate", "--lock", str(good), "--python", str(tmp_path / "nope"), "--out", str(tmp_path / "r")
    )
    assert bad.returncode == 2 and "no executable interpreter" in bad.stderr
    assert not (tmp_path / "r").exists()
