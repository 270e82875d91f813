"""Issue 24: every check accounted for in the three reports, warnings (and --strict), the checkpoint
stage's own folder, the cause first, the first-failure line without --python, hints only where they
apply, the stage reached.  Real validator runs against this venv (torch 2.13.0 CPU) unless pure."""

from __future__ import annotations

import errno
import json
import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from cli_support import envbuild
from validate_support import cpu_lock

from envbuild.boundary import to_json
from envbuild.models import CheckSpec, LockPackage
from envbuild.report.verify import verify_report
from envbuild.validate import exit_code, run_validation
from envbuild.validate.container import decide_container
from envbuild.validate.decide_work import checkpoint_folder_failed, decide_checkpoint

PY = sys.executable
WRITES = (
    "import json, os; os.makedirs('out', exist_ok=True);"
    "json.dump({'counts': {'total': 12}}, open('out/summary.json', 'w'))"
)
LEAVES = "import subprocess; subprocess.Popen(['sleep', '60'], start_new_session=True)"


def _validate(tmp_path: Path, stages: list[str], **kwargs: Any):  # type: ignore[no-untyped-def]
    lock_update = kwargs.pop("lock", {})
    lock_file = tmp_path / "lock.json"
    lock_file.write_text(to_json(cpu_lock(tmp_path, **lock_update)), encoding="utf-8")
    return run_validation(lock_file, out=tmp_path / "runs", workdir=tmp_path, stages=stages, **kwargs)


CHECKS = (
    CheckSpec(
        name="pilot",
        run=(PY, "-c", WRITES),
        expect_files=("out/summary.json",),
        expect_json={"out/summary.json:counts.total": 12},
    ),
    CheckSpec(name="daemon", run=(PY, "-c", LEAVES)),
)


@pytest.fixture
def venv_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """This venv's python first on PATH: no interpreter warning to muddle the checks' own."""
    monkeypatch.setenv("PATH", f"{Path(PY).parent}{os.pathsep}{os.environ.get('PATH', '')}")


def test_every_check_and_assertion_is_in_the_three_reports(tmp_path: Path, venv_first: None) -> None:
    report, run_dir = _validate(tmp_path, ["checks"], lock={"checks": CHECKS})
    assert report.ok, report.first_failure
    data = json.loads((run_dir / "report.json").read_text())
    checks = next(s for s in data["stages"] if s["stage"] == "checks")
    pilot, daemon = checks["facts"]["checks"]
    assert pilot["argv"] == [PY, "-c", WRITES] and pilot["returncode"] == 0 and pilot["seconds"] > 0
    assert "output_tail" in pilot and pilot["stragglers_killed"] == 0
    assert [(a["kind"], a["expected"], a["actual"], a["ok"]) for a in pilot["assertions"]][::2] == [
        ("exit", 0, 0, True),
        ("json", 12, 12, True),
    ]
    assert daemon["stragglers_killed"] == 1
    warning = checks["facts"]["warnings"][0]
    assert warning.startswith("check 'daemon' left 1 process running after it exited")

    md = (run_dir / "report.md").read_text()
    assert "| check | status | exit | seconds | stragglers killed | command |" in md
    assert "| pilot | passed | 0 |" in md and "| daemon | passed | 0 |" in md
    assert "| pilot | json `out/summary.json:counts.total` | 12 | 12 | ok |" in md
    assert f"## Warnings\n\n- **checks**: {warning}" in md
    assert "| checks | passed |" in md and "1 warning (below)" in md

    suite = ET.parse(run_dir / "junit.xml").getroot()
    names = [(c.get("classname"), c.get("name")) for c in suite.iter("testcase")]
    assert ("envbuild.validate.checks", "pilot") in names and ("envbuild.validate.checks", "daemon") in names
    assert ("envbuild.validate.checks.pilot", "file out/summary.json") in names
    assert ("envbuild.validate.checks.pilot", "json out/summary.json:counts.total") in names
    assert ("envbuild.validate.checks.daemon", "exit status") in names
    assert suite.get("tests") == str(len(names)) and suite.get("failures") == "0"
    daemon_case = next(c for c in suite.iter("testcase") if c.get("name") == "daemon")
    assert "warning: left 1 process(es) behind, killed" in (daemon_case.findtext("system-out") or "")
    assert verify_report(run_dir) == []


def test_strict_turns_the_warning_into_an_error(tmp_path: Path, venv_first: None) -> None:
    report, run_dir = _validate(tmp_path, ["checks"], lock={"checks": CHECKS}, strict=True)
    checks = report.stage("checks")
    assert checks.status == "failed" and exit_code(report) == 1
    assert checks.error == "warning (--strict): " + checks.facts["warnings"][0]
    assert report.first_failure is not None and report.first_failure.stage == "checks"
    suite = ET.parse(run_dir / "junit.xml").getroot()
    case = next(c for c in suite.iter("testcase") if c.get("name") == "checks")
    assert case.find("failure") is not None


def test_a_failed_check_shows_its_cause_before_its_command(tmp_path: Path, venv_first: None) -> None:
    code = "import sys; print('step 1'); sys.exit('KeyError: lr')"
    bad = CheckSpec(name="pilot", run=(PY, "-c", code))
    report, run_dir = _validate(tmp_path, ["checks"], lock={"checks": (bad,)})
    assert report.first_failure is not None
    assert report.first_failure.error == (
        "check 'pilot': exit status 1, expected 0 (last output line: KeyError: lr)"
    )
    md = (run_dir / "report.md").read_text()
    section = md[md.index("### `pilot`: failed") :]
    assert section.index("exit status 1") < section.index("KeyError: lr") < section.index("- command:")
    failure = next(
        c for c in ET.parse(run_dir / "junit.xml").getroot().iter("testcase") if c.get("name") == "pilot"
    )
    text = failure.findtext("failure") or ""
    assert text.index("exit status: 1") < text.index("KeyError: lr") < text.index("command:")


def test_stage_reached_is_the_last_stage_that_ran(tmp_path: Path) -> None:
    report, run_dir = _validate(tmp_path, ["checks"], lock={"checks": ()})
    assert report.stage("checks").status == "skipped"
    assert report.stage_reached == "packages"
    assert "- stage reached: packages" in (run_dir / "report.md").read_text()


def test_without_python_the_first_failure_says_which_interpreter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock's interpreter is not here, no environment is active: envbuild validated its own
    interpreter, which lacks the lock's packages."""
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        monkeypatch.delenv(var, raising=False)
    missing = LockPackage(
        name="not-installed-envbuild", version="1.0", requirement="not-installed-envbuild==1.0", origin="t"
    )
    base = cpu_lock(tmp_path)
    report, _ = _validate(
        tmp_path,
        ["packages"],
        lock={"python_executable": "/nonexistent/venv/bin/python", "packages": (*base.packages, missing)},
    )
    assert report.first_failure is not None and report.first_failure.stage == "packages"
    assert report.first_failure.error.startswith(
        "validating envbuild's own interpreter; pass --python: 1 package problem: not-installed-envbuild"
    )


def test_with_python_the_first_failure_is_the_stages(tmp_path: Path) -> None:
    missing = LockPackage(
        name="not-installed-envbuild", version="1.0", requirement="not-installed-envbuild==1.0", origin="t"
    )
    base = cpu_lock(tmp_path)
    report, _ = _validate(tmp_path, ["packages"], lock={"packages": (*base.packages, missing)}, python=PY)
    assert report.first_failure is not None
    assert report.first_failure.error.startswith("1 package problem: not-installed-envbuild")


# -- the checkpoint stage's own folder --------------------------------------------------------------


def test_checkpoint_leaves_the_users_files_alone(tmp_path: Path) -> None:
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "checkpoint.pt").write_bytes(b"the user's own checkpoint")
    (folder / "reference.pt").write_bytes(b"and another")
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir()}
    report, _ = _validate(tmp_path, ["checkpoint"], lock={"checkpoint_dir": str(folder)})
    ck = report.stage("checkpoint")
    assert ck.status == "passed", ck.error
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir()} == before
    assert Path(ck.facts["work_folder"]).parent == folder and ck.facts["work_folder_removed"] is True
    assert Path(ck.facts["path"]).name == "checkpoint.pt" and Path(ck.facts["path"]).parent.parent == folder


def test_a_folder_the_checkpoint_cannot_use_is_named_with_the_errno(tmp_path: Path) -> None:
    folder = "/sys/envbuild-checkpoint-test"  # sysfs refuses a new folder, even to root
    report, _ = _validate(tmp_path, ["checkpoint"], lock={"checkpoint_dir": folder})
    ck = report.stage("checkpoint")
    assert ck.status == "failed"
    assert ck.error == (
        f"checkpoint folder {folder}: cannot create a fresh folder in {folder}: "
        "Operation not permitted (EPERM)"
    )
    assert "native crash" not in (ck.hint or "") and "may not write there" in (ck.hint or "")


@pytest.mark.parametrize(
    ("code", "meaning", "fix"),
    [
        (errno.EROFS, "Read-only file system (EROFS)", "read-only file system"),
        (errno.ENOSPC, "No space left on device (ENOSPC)", "full"),
        (errno.EACCES, "Permission denied (EACCES)", "uid 1000"),
    ],
)
def test_checkpoint_folder_errors_say_what_the_errno_means(code: int, meaning: str, fix: str) -> None:
    res = checkpoint_folder_failed("/data/ckpt", code, "/data/ckpt", "create a fresh folder in", 1000)
    assert res.error == f"checkpoint folder /data/ckpt: cannot create a fresh folder in /data/ckpt: {meaning}"
    assert fix in (res.hint or "")


def test_a_write_the_probe_could_not_make_names_the_folder() -> None:
    save = {
        "os_error": {"errno": "ENOSPC", "strerror": "No space left", "path": "/d/ckpt/x/checkpoint.pt.tmp"}
    }
    res = decide_checkpoint(save, {}, "cpu", "/d/ckpt", 0)
    assert res.error == (
        "checkpoint folder /d/ckpt: cannot write /d/ckpt/x/checkpoint.pt.tmp: "
        "No space left on device (ENOSPC)"
    )


# -- hints only where they apply ---------------------------------------------------------------------


def _container_facts(nofile: int, in_container: bool) -> dict[str, Any]:
    return {
        "uid": 0,
        "groups": [],
        "shm_bytes": 8 << 30,
        "nodes": [],
        "rlimits": {"nofile": {"soft": nofile, "hard": nofile}},
        "cgroup": {},
        "in_container": in_container,
    }


def test_docker_flags_only_inside_a_container(tmp_path: Path) -> None:
    lock = cpu_lock(tmp_path)
    inside = decide_container(lock, _container_facts(1024, True))
    assert "--ulimit nofile=1048576" in inside.facts["warnings"][0]
    outside = decide_container(lock, _container_facts(1024, False))
    (warning,) = outside.facts["warnings"]
    assert "--ulimit" not in warning and "docker" not in warning
    assert "ulimit -n" in warning


def test_torch_hints_only_when_the_lock_has_torch(tmp_path: Path) -> None:
    torchless = cpu_lock(tmp_path, torch_version=None, torch_variant=None, profile_kind="ubuntu")
    assert decide_container(torchless, _container_facts(1024, True)).facts["warnings"] == []
    (with_torch,) = decide_container(cpu_lock(tmp_path), _container_facts(1024, True)).facts["warnings"]
    assert "torch.multiprocessing" in with_torch


def test_the_path_hint_takes_at_most_two_lines_and_warnings_reach_the_terminal(tmp_path: Path) -> None:
    """Issue 24: 12 lines of PATH hints on every run.  An impostor ``python`` / ``python3`` first on
    PATH, an 80-column terminal: the warning is printed once, below the table, in at most 2 lines."""
    import tempfile

    # a short folder (not under pytest's tmp path, whose length varies with xdist's worker folder): the
    # hint's length is then the message's, not that of the test's temporary path
    impostor = Path(tempfile.mkdtemp(prefix="envb-", dir="/tmp")) / "shims"
    impostor.mkdir()
    for name in ("python", "python3"):
        (impostor / name).write_text("#!/bin/sh\nexit 97\n")
        (impostor / name).chmod(0o755)
    lock_file = tmp_path / "lock.json"
    lock_file.write_text(to_json(cpu_lock(tmp_path)), encoding="utf-8")
    env = {**os.environ, "PATH": f"{impostor}{os.pathsep}/usr/bin:/bin", "COLUMNS": "80", "TERM": "dumb"}
    proc = envbuild(
        *(
            "validate",
            "--lock",
            lock_file,
            "--out",
            tmp_path / "runs",
            "--python",
            PY,
            "--stages",
            "interpreter",
        ),
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    (line,) = [line for line in lines if "on PATH" in line]  # once: not in the table too
    assert (
        line
        == f"warning: interpreter: `python`, `python3` on PATH: {impostor}, not the interpreter under test"
    )
    assert len(line) <= 2 * 80, line  # one line, wrapped by an 80-column terminal into 2 at most
    assert "1 warning (below)" in proc.stdout
