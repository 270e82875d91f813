"""The warm probe worker and the stages that run beside the ladder, with real processes.

A probe stand-in (``ENVBUILD_PROBE_<NAME>``, the documented test hook) hangs or kills its process
inside the warm worker: the stage is reported as a one-shot probe's would be, the worker is killed and
the next stage gets a new one.  A background stage the run will not reach is cancelled with its
processes.  /proc shows that nothing is left behind: the killed worker's pid, or the marker a
cancelled stand-in's child carries.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from validate_support import cpu_lock

from envbuild.validate import run_validation
from envbuild.validate.worker import TorchWorker


def alive_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def stand_in(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(body, encoding="utf-8")
    return path


def test_the_worker_imports_torch_once_for_several_probes() -> None:
    worker = TorchWorker(sys.executable)
    try:
        first = worker.call("accelerator", {}, 120)
        second = worker.call("compute", {"devices": ["cpu"]}, 120)
        assert first.outcome == "ok" and second.outcome == "ok", (first.reason, second.reason)
        assert first.data["torch_version"].startswith("2.") and second.data["checks"]
        assert worker.starts == 1 and worker.ready is not None and "torch" in worker.ready
    finally:
        worker.close()
    assert worker.proc is None


def test_a_hang_in_the_worker_times_out_its_stage_and_the_next_stage_gets_a_new_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = stand_in(tmp_path, "hang", "import time\ntime.sleep(600)\n")
    monkeypatch.setenv("ENVBUILD_PROBE_ACCELERATOR", str(script))
    worker = TorchWorker(sys.executable)
    try:
        warm = worker.call("compute", {"devices": ["cpu"]}, 120)  # torch imported: the 3 s are the probe's
        assert warm.outcome == "ok" and worker.proc is not None
        hung_pid = worker.proc.pid  # the hang runs inside the worker process itself
        started = time.monotonic()
        hung = worker.call("accelerator", {}, 3)
        assert hung.outcome == "timed_out" and time.monotonic() - started < 8
        assert "did not finish within 3 s (running in the warm worker)" in hung.reason
        assert worker.proc is None and not Path(f"/proc/{hung_pid}").exists()  # killed and reaped
        after = worker.call("compute", {"devices": ["cpu"]}, 120)
        assert after.outcome == "ok" and worker.starts == 2
    finally:
        worker.close()


def test_a_crash_in_the_worker_is_reported_against_its_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = stand_in(tmp_path, "crash", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    monkeypatch.setenv("ENVBUILD_PROBE_ACCELERATOR", str(script))
    lock = cpu_lock(tmp_path / "work")
    (tmp_path / "work").mkdir()
    report, _ = run_validation(
        lock,
        python=sys.executable,
        out=tmp_path / "runs",
        stages=["accelerator", "compute"],
        keep_going=True,
    )
    acc = report.stage("accelerator")
    assert acc.status == "failed"
    assert acc.error is not None and "crashed the warm worker while running (killed by SIGSEGV)" in acc.error
    # torch's import is a fact nobody established (the probe crashed): compute still runs, in a new worker
    assert report.stage("compute").status == "passed"


def test_a_background_stage_the_run_will_not_reach_is_cancelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The extension build starts with the run; a failure before it (without --keep-going) stops it."""
    marker = "envbuild-background-ext-8123"
    ext = stand_in(
        tmp_path,
        "ext",
        f"import subprocess, sys\nsys.stdin.read()\nsubprocess.run(['sleep', '600', '--', '{marker}'])\n",
    )
    bad = stand_in(tmp_path, "os_probe", "import sys\nsys.stdin.read()\nsys.exit(3)\n")
    monkeypatch.setenv("ENVBUILD_PROBE_EXTENSIONS", str(ext))
    monkeypatch.setenv("ENVBUILD_PROBE_OS", str(bad))
    (tmp_path / "work").mkdir()
    started = time.monotonic()
    report, _ = run_validation(cpu_lock(tmp_path / "work"), python=sys.executable, out=tmp_path / "runs")
    assert time.monotonic() - started < 60
    assert report.stage("os").status == "failed"
    ext_result = report.stage("extensions")
    assert ext_result.status == "aborted" and ext_result.error == "prerequisite 'compute' aborted"
    deadline = time.monotonic() + 5
    while alive_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert alive_with(marker) == []
