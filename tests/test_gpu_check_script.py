"""scripts/gpu-check.sh, run for real as its dry run on this GPU-less host (OUT unset).

The dry run renders tests/gpu/dryrun-cuda-host.toml, validates this host with the real probes and
vendor-tool lookups, and must fail the accelerator stage with the "no GPU visible" diagnosis, still
write the report, verify it, and exit with the validator's code (1).  The device run (OUT set, an H200)
cannot run here; its profile is at least checked to render.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu-check.sh"


def _has_gpu() -> bool:
    return any(Path("/dev").glob("nvidia[0-9]*")) or Path("/dev/kfd").exists()


@pytest.mark.slow
@pytest.mark.skipif(_has_gpu(), reason="the dry run expects a host without GPU device nodes")
def test_dry_run_fails_accelerator_with_hint_and_writes_a_verified_report(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OUT" and not k.startswith("GPU_CHECK_")}
    env.pop("NVIDIA_VISIBLE_DEVICES", None)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env["TMPDIR"] = str(tmp_path)
    env["GPU_CHECK_PYTHON"] = sys.executable
    proc = subprocess.run(
        ["bash", str(SCRIPT)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output  # the validator's code: a stage failed

    found = re.search(r"gpu-check: results in (\S+)", proc.stdout)
    assert found, output
    out = Path(found.group(1))
    assert out.parent == tmp_path
    files = sorted(p.name for p in out.iterdir())
    # no nvidia-smi here: no nvidia-smi-q-x.xml; hardware.json says no tool answered
    assert files == [
        "envbuild.lock.json",
        "hardware.json",
        "junit.xml",
        "report.json",
        "report.md",
        "run.tar.gz",
    ]
    hardware = json.loads((out / "hardware.json").read_text(encoding="utf-8"))
    assert hardware["nvml"] is None and hardware["nvidia_smi_q_x"] is None
    assert hardware["verdicts_nvml"]["unjudged"] == [
        "every rule: no vendor tool answered (NVML (nvidia-ml-py), nvidia-smi -q -x)"
    ]
    assert all(p.is_file() for p in out.iterdir())  # nothing in sub-folders: the device tool limits

    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    stages = {s["stage"]: s for s in report["stages"]}
    for name in ("interpreter", "os", "packages"):
        assert stages[name]["status"] == "passed", stages[name]
    acc = stages["accelerator"]
    assert acc["status"] == "failed"
    assert acc["error"] == "cuda lock but the vendor tools see no GPU"
    assert "no /dev/nvidia* device nodes" in acc["hint"]
    # the container stage comes first and names the missing nodes with the flag that exposes them
    container = stages["container"]
    assert container["status"] == "failed" and "/dev/nvidiactl is missing" in container["error"]
    assert "--gpus all" in container["hint"]
    assert report["first_failure"]["stage"] == "container"
    # a CUDA lock without torch: the devices stage judges the hardware, and no vendor tool answered
    devices = stages["devices"]
    assert devices["status"] == "failed" and devices["error"].startswith("no vendor tool answered")
    assert report["hardware"]["facts"] is None
    assert report["ok"] is False
    # Only the interpreter path in the lock is rewritten to this host's interpreter.
    lock = json.loads((out / "envbuild.lock.json").read_text(encoding="utf-8"))
    assert lock["python_executable"] == sys.executable
    assert lock["backend"] == "cuda" and [t["id"] for t in lock["targets"]] == ["h200"]
    assert report["lock"]["content"]["python_executable"] == sys.executable

    assert re.search(r": intact\b", proc.stdout, re.MULTILINE), output  # envbuild report verify passed
    assert "report verify exit 0" in proc.stdout
    assert "hint: no /dev/nvidia* device nodes" in proc.stdout  # the summary shows the hint

    # The whole run folder comes back too, and verifies after unpacking.
    unpacked = tmp_path / "unpacked"
    with tarfile.open(out / "run.tar.gz") as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(unpacked, filter="data")
        else:  # pragma: no cover - Python < 3.11.4
            tar.extractall(unpacked)
    (run_dir,) = list(unpacked.iterdir())
    assert run_dir.name == report["run_id"]
    verify = subprocess.run(
        [sys.executable, "-c", "from envbuild.cli import main; main()", "report", "verify", str(run_dir)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    # Nothing is left behind in the script's work folder.
    assert not list(tmp_path.glob("gpu-check-work.*"))


@pytest.mark.slow
def test_device_profile_renders_for_the_h200(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from envbuild.cli import main; main()",
            "render",
            str(ROOT / "tests" / "gpu" / "h200-torch211.toml"),
            "--out",
            str(tmp_path / "bundle"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr  # no error findings: no --force needed
    lock = json.loads((tmp_path / "bundle" / "envbuild.lock.json").read_text(encoding="utf-8"))
    assert (lock["backend"], lock["accelerator_version"], lock["torch_version"]) == ("cuda", "13.0", "2.11.0")
    assert (lock["python_version"], lock["os"]) == ("3.12", "ubuntu24.04")
    assert [t["id"] for t in lock["targets"]] == ["h200"]
    # The probe ops are compiled once per run: gpu-check.sh builds them as the builder stage does, and
    # compile_extensions (compile them again on arrival) stays off.
    assert lock["probe_ops"] == ["cpp", "cuda"]
    assert lock["compile_extensions"] is False and lock["extensions"] == ["triton"]
    assert lock["gpu_memory_gib"] == 100.0
    assert "sm_90" in lock["required_archs"]


def test_script_is_valid_bash() -> None:
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0
