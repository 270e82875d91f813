"""Faults of the validator itself (issue 12, item 5): killed with SIGKILL mid-stage, and a disk that fills
before the report is written.

Real ``python -m envbuild validate`` processes; ``ENVBUILD_PROBE_<STAGE>`` (the documented test hook)
substitutes a probe that hangs (the tree of test_validate_faults: a grandchild and a setsid daemon) or
one that fills the disk.  The full disk is a real small tmpfs (root needed).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from build_support import small_tmpfs
from cli_support import ENVBUILD
from validate_support import alive, cpu_lock, hang_script

from envbuild.boundary import to_json
from envbuild.report.verify import verify_report
from envbuild.validate.runfolder import INCOMPLETE, RUN_ENV, RUNNING, settle_stale_runs, start_run


def validate(
    lock_file: Path, out: Path, workdir: Path, *extra: str, env: dict[str, str]
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            *ENVBUILD,
            *("validate", "--lock", str(lock_file)),
            *("--out", str(out), "--workdir", str(workdir), *extra),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def lock_file_in(tmp_path: Path) -> Path:
    lock_file = tmp_path / "lock.json"
    lock_file.write_text(to_json(cpu_lock(tmp_path)), encoding="utf-8")
    return lock_file


def test_a_validator_killed_with_sigkill_is_reported_and_cleaned_up_by_the_next_run(tmp_path: Path) -> None:
    lock_file, out = lock_file_in(tmp_path), tmp_path / "runs"
    base_env = {k: v for k, v in os.environ.items() if k != RUN_ENV}
    hung = validate(
        lock_file, out, tmp_path, env={**base_env, "ENVBUILD_PROBE_PACKAGES": str(hang_script(tmp_path))}
    )
    deadline = time.monotonic() + 60
    while not (tmp_path / "pids").exists():
        assert time.monotonic() < deadline, "the slow probe never started"
        assert hung.poll() is None, hung.communicate()
        time.sleep(0.1)
    (stale_dir,) = list(out.iterdir())
    marker = json.loads((stale_dir / RUNNING).read_text())
    assert marker["run_id"] == stale_dir.name and marker["pid"] == hung.pid

    hung.send_signal(signal.SIGKILL)  # no handler runs: nothing is killed, nothing written
    hung.communicate(timeout=30)
    assert hung.returncode == -signal.SIGKILL
    probe, grandchild, daemon = (int(x) for x in (tmp_path / "pids").read_text().split())
    # What a SIGKILL leaves behind: the probe's whole tree lives on (new sessions, re-parented to init).
    assert alive(probe) and alive(grandchild) and alive(daemon)
    assert sorted(p.name for p in stale_dir.iterdir()) == [RUNNING]  # no report, no manifest

    try:
        proc = validate(lock_file, out, tmp_path, "--stages", "os", env=base_env)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert (
            f"envbuild: warning: the previous run {stale_dir.name} (started {marker['started_at']}, "
            f"validator pid {hung.pid}) did not complete: it was killed before writing its report; killed "
        ) in err
        assert f"Its folder {stale_dir} is kept, marked {INCOMPLETE}" in err
        deadline = time.monotonic() + 5
        while any(alive(p) for p in (probe, grandchild, daemon)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(probe) and not alive(grandchild) and not alive(daemon)
        record = json.loads((stale_dir / INCOMPLETE).read_text())
        assert record["run_id"] == stale_dir.name and record["leftovers_killed"] >= 3
        assert not (stale_dir / RUNNING).exists()
        (new_dir,) = [d for d in out.iterdir() if d != stale_dir]
        assert verify_report(new_dir) == []  # complete, and its own marker gone
        assert RUN_ENV not in (new_dir / "env.txt").read_text()

        again = validate(lock_file, out, tmp_path, "--stages", "os", env=base_env)
        _, err = again.communicate(timeout=120)
        assert again.returncode == 0 and "did not complete" not in err, err  # told once, not every run
    finally:
        for pid in (probe, grandchild, daemon):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_run_in_progress_is_not_taken_for_a_stale_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A marker whose validator lives (this process) is left alone; one whose pid is now another
    process's (same pid, other start time) is stale."""
    monkeypatch.delenv(RUN_ENV, raising=False)
    live = tmp_path / "runs" / "live"
    live.mkdir(parents=True)
    start_run(live)
    monkeypatch.delenv(RUN_ENV)
    assert settle_stale_runs(tmp_path / "runs") == []
    assert (live / RUNNING).exists()

    marker = json.loads((live / RUNNING).read_text())
    reused = tmp_path / "runs" / "reused"
    reused.mkdir()
    (reused / RUNNING).write_text(json.dumps({**marker, "run_id": "reused", "pid_start_ticks": 1}))
    (stale,) = settle_stale_runs(tmp_path / "runs")
    assert stale.run_id == "reused" and stale.leftovers_killed == 0
    assert (reused / INCOMPLETE).exists() and (live / RUNNING).exists()


FILL = """\
import os, sys
sys.stdin.read()
fd = os.open(os.environ["FILL_PATH"], os.O_WRONLY | os.O_CREAT, 0o644)
try:
    while os.write(fd, b"\\0" * 4096):
        pass
except OSError:
    pass
print('ENVBUILD-RESULT {"not": "a packages result"}')
"""


def test_a_disk_that_fills_before_the_report_leaves_no_half_written_report(tmp_path: Path) -> None:
    lock_file = lock_file_in(tmp_path)
    filler = tmp_path / "fill.py"
    filler.write_text(FILL, encoding="utf-8")
    base_env = {k: v for k, v in os.environ.items() if k != RUN_ENV}
    with small_tmpfs(tmp_path / "disk", 1024) as disk:
        out = disk / "runs"
        first = validate(lock_file, out, tmp_path, "--stages", "os", env=base_env)
        _, err = first.communicate(timeout=120)
        assert first.returncode == 0, err
        (previous,) = list(out.iterdir())
        before = {p.name: p.read_bytes() for p in previous.iterdir()}

        env = {**base_env, "ENVBUILD_PROBE_PACKAGES": str(filler), "FILL_PATH": str(disk / "filler")}
        proc = validate(lock_file, out, tmp_path, "--stages", "packages", env=env)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 1, err
        assert ": cannot write the report: No space left on device; the run folder " in err
        assert f"envbuild: error: {out}/" in err and "nothing half-written is kept" in err
        assert "Traceback" not in err
        assert list(out.iterdir()) == [previous]  # the failed run's folder removed, no temp file
        assert {p.name: p.read_bytes() for p in previous.iterdir()} == before
        assert verify_report(previous) == []
