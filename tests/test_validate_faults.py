"""Misbehaving probes (a signal, a hang, garbage) and interruption, with real subprocesses.

``ENVBUILD_PROBE_<STAGE>`` substitutes a probe script (the documented test hook); everything else,
including the interpreter, the process-group kill and the report writing, is the real thing.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_support import ENVBUILD, envbuild
from validate_support import alive, cpu_lock, hang_script

from envbuild.boundary import to_json
from envbuild.models import CheckSpec
from envbuild.report.verify import verify_report
from envbuild.validate import exit_code, run_validation

SEGV = "import os, signal, sys\nsys.stdin.read()\nos.kill(os.getpid(), signal.SIGSEGV)\n"
GARBAGE = "import sys\nsys.stdin.read()\nprint('Segmentation fault? no: hello from a wrapper script')\n"
BAD_EXIT = (
    "import sys\nsys.stdin.read()\n"
    "sys.stderr.write('ImportError: libcudart.so.12: cannot open\\n')\nsys.exit(3)\n"
)


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stage: str, script_text: str | None, **kwargs):  # type: ignore[no-untyped-def]
    if script_text is not None:
        script = tmp_path / f"probe_{stage}.py"
        script.write_text(script_text, encoding="utf-8")
    else:
        script = hang_script(tmp_path)
    monkeypatch.setenv(f"ENVBUILD_PROBE_{stage.upper()}", str(script))
    lock_file = tmp_path / "lock.json"
    lock_file.write_text(to_json(cpu_lock(tmp_path)), encoding="utf-8")
    return run_validation(lock_file, out=tmp_path / "runs", workdir=tmp_path, **kwargs)


def test_probe_killed_by_signal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report, run_dir = _run(tmp_path, monkeypatch, "packages", SEGV)
    pk = report.stage("packages")
    assert pk.status == "failed"
    assert pk.error == "probe 'packages' killed by SIGSEGV"
    assert pk.facts["returncode"] == -signal.SIGSEGV
    assert report.stage("accelerator").status == "aborted"
    assert report.stage("accelerator").error == "prerequisite 'packages' failed"
    assert report.first_failure is not None and report.first_failure.stage == "packages"
    assert report.stage_reached == "packages"
    assert exit_code(report) == 1
    assert verify_report(run_dir) == []
    assert json.loads((run_dir / "report.json").read_text())["ok"] is False


def test_probe_printing_garbage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report, _ = _run(tmp_path, monkeypatch, "packages", GARBAGE)
    pk = report.stage("packages")
    assert pk.status == "failed"
    assert pk.error == (
        "probe 'packages' printed no JSON result: Segmentation fault? no: hello from a wrapper script"
    )
    assert exit_code(report) == 1


def test_probe_nonzero_exit_keeps_last_stderr_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report, _ = _run(tmp_path, monkeypatch, "os", BAD_EXIT, keep_going=True, stages=["os", "packages"])
    assert (
        report.stage("os").error
        == "probe 'os' exited with status 3: ImportError: libcudart.so.12: cannot open"
    )
    assert report.stage("packages").status == "passed"  # independent of os, and --keep-going


def test_hanging_probe_times_out_and_its_whole_tree_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    start = time.monotonic()
    report, run_dir = _run(tmp_path, monkeypatch, "packages", None, timeouts={"packages": 2})
    assert time.monotonic() - start < 60  # the daemon holding stdout open lives 301 s
    pk = report.stage("packages")
    assert pk.status == "timed_out"
    assert pk.duration_s < 2 + 3
    assert pk.error == "probe 'packages' did not finish within 2 s; killed with every process it started"
    assert "--timeout packages=SECONDS" in (pk.hint or "")
    assert report.stage("checks").error == "prerequisite 'packages' timed out"
    assert report.first_failure is not None and report.first_failure.stage == "packages"
    assert exit_code(report) == 1
    probe_pid, grandchild, daemon = (int(x) for x in (tmp_path / "pids").read_text().split())
    assert not alive(grandchild) and not alive(probe_pid) and not alive(daemon)
    assert verify_report(run_dir) == []


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_during_a_probe_still_writes_the_report(
    tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    lock_file = tmp_path / "lock.json"
    lock_file.write_text(to_json(cpu_lock(tmp_path)), encoding="utf-8")
    env = {**os.environ, "ENVBUILD_PROBE_PACKAGES": str(hang_script(tmp_path))}
    out = tmp_path / "runs"
    proc = subprocess.Popen(
        [
            *ENVBUILD,
            "validate",
            "--lock",
            str(lock_file),
            "--out",
            str(out),
            "--workdir",
            str(tmp_path),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not (tmp_path / "pids").exists():
        assert time.monotonic() < deadline, "the slow probe never started"
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err.decode()
    (run_dir,) = list(out.iterdir())
    report = json.loads((run_dir / "report.json").read_text())
    assert report["interrupted"] is True and report["signal"] == sig.name and report["ok"] is False
    stages = {s["stage"]: s for s in report["stages"]}
    assert stages["interpreter"]["status"] == "passed"
    packages = stages["packages"]
    assert packages["status"] == "aborted"
    assert re.fullmatch(rf"interrupted by {sig.name} after \d+\.\d s", packages["error"]), packages["error"]
    assert stages["checks"]["error"] == f"not run: the run was interrupted ({sig.name})"
    assert report["first_failure"] == {"stage": "packages", "error": packages["error"]}
    # the extension build started with the run, beside the ladder: it ran too, and is the last that did
    assert stages["extensions"]["status"] == "aborted" and "after" in stages["extensions"]["error"]
    assert report["stage_reached"] == "extensions"
    assert verify_report(run_dir) == []
    _, grandchild, daemon = (int(x) for x in (tmp_path / "pids").read_text().split())
    deadline = time.monotonic() + 5
    while (alive(grandchild) or alive(daemon)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(grandchild) and not alive(daemon)


def test_a_check_running_when_the_signal_comes_was_interrupted_not_not_run(tmp_path: Path) -> None:
    """Issue 24: an interrupted stage was reported as "not run".  The checks stage runs beside the
    ladder; SIGINT while its check sleeps: it ran, for some seconds, and is the stage reached."""
    started = tmp_path / "started"
    code = f"import pathlib, time; pathlib.Path({str(started)!r}).touch(); time.sleep(120)"
    lock = cpu_lock(tmp_path, checks=(CheckSpec(name="slow", run=(sys.executable, "-c", code)),))
    lock_file = tmp_path / "lock.json"
    lock_file.write_text(to_json(lock), encoding="utf-8")
    out = tmp_path / "runs"
    argv = [*ENVBUILD, "validate", "--lock", str(lock_file), "--out", str(out)]
    proc = subprocess.Popen(
        [*argv, "--workdir", str(tmp_path), "--stages", "checks"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not started.exists():
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    time.sleep(1.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()
    (run_dir,) = list(out.iterdir())
    report = json.loads((run_dir / "report.json").read_text())
    checks = next(s for s in report["stages"] if s["stage"] == "checks")
    assert checks["status"] == "aborted"
    match = re.fullmatch(r"interrupted by SIGINT after (\d+\.\d) s", checks["error"])
    assert match and float(match.group(1)) >= 1.0, checks["error"]
    assert report["stage_reached"] == "checks"
    assert [s["stage"] for s in report["stages"]] == ["interpreter", "packages", "checks"]
    assert verify_report(run_dir) == []


def test_gpu_lock_without_a_gpu_fails_at_accelerator_with_the_hint(tmp_path: Path) -> None:
    """The real runner and CLI; the accelerator probe replays torch's recorded view of a container
    started without --gpus (tests/fixtures/torch), since this machine has no GPU to hide."""
    from validate_support import FIXTURES, gpu_lock

    recorded = json.loads((FIXTURES / "torch" / "no-gpu-container-torch2.7.1-cu128.json").read_text())
    replay = tmp_path / "replay.py"
    replay.write_text(
        "import json, sys\nsys.stdin.read()\n"
        f"print('ENVBUILD-RESULT ' + json.dumps({recorded['accelerator']!r}))\n",
        encoding="utf-8",
    )
    lock = gpu_lock("cuda", ["h100"], python_executable=sys.executable, python_version="3.11")
    lock_file = tmp_path / "lock.json"
    lock_file.write_text(to_json(lock), encoding="utf-8")
    env = {**os.environ, "ENVBUILD_PROBE_ACCELERATOR": str(replay)}
    proc = envbuild(
        *("validate", "--lock", lock_file, "--out", tmp_path / "r", "--json"),
        *("--stages", "accelerator,devices,compute"),
        env=env,
    )
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)["report"]
    stages = {s["stage"]: s for s in report["stages"]}
    assert stages["packages"]["status"] == "passed"
    acc = stages["accelerator"]
    assert acc["status"] == "failed" and acc["error"] == "cuda lock but no GPU is visible to torch"
    assert "docker run --gpus all" in acc["hint"]
    assert stages["devices"]["error"] == "prerequisite 'accelerator' failed"
    assert report["first_failure"] == {
        "stage": "accelerator",
        "error": "cuda lock but no GPU is visible to torch",
    }


def test_importing_the_validator_pulls_in_neither_torch_nor_docker() -> None:
    code = (
        "import sys, envbuild.validate, envbuild.cli._validate\n"
        "print(sorted({'torch', 'docker'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_missing_toolchain_is_named_by_the_real_probe(tmp_path: Path) -> None:
    from envbuild.validate.decide_work import decide_extensions
    from envbuild.validate.probe import run_probe

    env = {**os.environ, "PATH": str(tmp_path)}  # no compiler and no ninja on PATH
    out = run_probe(
        sys.executable, "extensions", {"backend": "cpu", "compile": True, "extensions": []}, 120, env=env
    )
    assert out.outcome == "ok", out.reason
    (part,) = out.data["parts"]
    assert part["status"] == "failed"
    assert part["error"] == (
        "cannot compile a C++ extension: missing C++ compiler (c++ / g++), "
        "ninja (pip install ninja, or the ninja-build package)"
    )
    res = decide_extensions(cpu_lock(tmp_path), out.data)
    assert res.status == "failed" and "apt: g++ python3-dev ninja-build" in (res.hint or "")


def test_a_missing_compiler_is_named_before_any_command(tmp_path: Path) -> None:
    """Issue 24: CXX=/usr/bin/no-such-g++ showed a 600-character command; "not found" only in
    report.json.  The probe names the missing binary first."""
    from envbuild.validate.decide_work import decide_extensions
    from envbuild.validate.probe import run_probe

    env = {**os.environ, "CXX": "/usr/bin/no-such-g++"}
    args = {"backend": "cpu", "compile": True, "extensions": []}
    out = run_probe(sys.executable, "extensions", args, 120, env=env)
    assert out.outcome == "ok", out.reason
    (part,) = out.data["parts"]
    assert (
        part["error"]
        == "cannot compile a C++ extension: missing C++ compiler /usr/bin/no-such-g++ (from $CXX)"
    )
    res = decide_extensions(cpu_lock(tmp_path), out.data)
    assert res.error == part["error"]
