"""scripts/gpu-check.sh, run for real as its dry run on this GPU-less host (OUT unset).

The dry run renders tests/gpu/dryrun-cuda-host.toml (a CUDA lock for one A100 80GB, no torch) and
validates this host with the real probes, with NVML answered by the NVML stand-in (tests/nvml_stub, the
healthy A100 state of tests/test_hardware_nvml.py) through the real nvidia-ml-py: the accelerator and
devices stages pass on the stand-in's facts, the container stage fails (no /dev/nvidia* nodes), the
report is written and verifies, and the script exits with the validator's code (1).  Its hardware
capture prints NVML's raw answers beside the parsed DeviceFacts.  The device run (OUT set, an H200)
cannot run here; its profile is checked to render, and its time budget to fit under 5 minutes.
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
from conftest import once_per_run
from nvml_stand_in import LIBRARIES, LIBRARY, build

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu-check.sh"
A100 = "NVIDIA A100-SXM4-80GB"
STAND_IN_NVML = "stand-in 12.535.54.03"  # the stub's NVML version: "stand-in" + the capture's


def _has_gpu() -> bool:
    return any(Path("/dev").glob("nvidia[0-9]*")) or Path("/dev/kfd").exists()


@pytest.fixture(scope="session")
def nvml_stand_in(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of the full stand-in libnvidia-ml.so.1, built once per run (the same once_per_run
    folder as tests/test_hardware_nvml.py's, so that a run builds it once for both)."""

    def make(folder: Path) -> None:
        for name, hide in LIBRARIES.items():
            build(folder / name, hide)

    return once_per_run(tmp_path_factory, "nvml-stand-in", make) / "full"


def _block(text: str, start: str, end: str) -> str:
    """The text from the line beginning ``start`` up to the next line beginning ``end``."""
    found = re.search(rf"^{re.escape(start)}.*?(?=^{re.escape(end)})", text, re.MULTILINE | re.DOTALL)
    assert found, f"no block from {start!r} to {end!r} in:\n{text}"
    return found.group(0)


@pytest.mark.slow
@pytest.mark.skipif(_has_gpu(), reason="the dry run expects a host without GPU device nodes")
def test_dry_run_reads_the_nvml_stand_in_and_writes_a_verified_report(
    tmp_path: Path, nvml_stand_in: Path
) -> None:
    env = {
        k: v for k, v in os.environ.items() if k != "OUT" and not k.startswith(("GPU_CHECK_", "NVML_STUB"))
    }
    for name in ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH"):
        env.pop(name, None)
    env["TMPDIR"] = str(tmp_path)
    env["GPU_CHECK_PYTHON"] = sys.executable
    env["GPU_CHECK_NVML_STUB"] = str(nvml_stand_in)
    proc = subprocess.run(
        ["bash", str(SCRIPT)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output  # the validator's code: a stage (container) failed
    out_text = proc.stdout

    # The stand-in, said as such, from the start.
    assert f"NVML stand-in: {nvml_stand_in / LIBRARY} (given), state 'healthy'" in out_text, output
    assert f"NVML: the NVML stand-in in {nvml_stand_in} (no GPU behind it)" in out_text

    # The hardware capture: NVML's raw answers for each call envbuild made, then the parsed DeviceFacts.
    hardware = _block(out_text, "=== hardware:", "=== results")
    system = [line for line in hardware.splitlines() if line.startswith("  system  ")]
    assert system[:4] == [
        "  system  nvmlInit() = None",
        "  system  nvmlSystemGetDriverVersion() = '535.54.03'",
        "  system  nvmlDeviceGetCount() = 1",
        "  system  nvmlDeviceGetHandleByIndex(0) = gpu0",
    ], hardware
    assert f"  system  nvmlSystemGetNVMLVersion() = '{STAND_IN_NVML}'" in system
    assert "  system  nvmlSystemGetCudaDriverVersion_v2() = 12020" in system
    raw = _block(hardware, "--- gpu0: raw values (pynvml)", "--- gpu0: parsed DeviceFacts")
    for line in (
        f"  nvmlDeviceGetName(gpu0) = '{A100}'",
        "  nvmlDeviceGetUUID(gpu0) = 'GPU-513536b6-7d19-9063-b049-1e69664bb298'",
        "  nvmlDeviceGetMemoryInfo(gpu0, 33554472) = {version: 33554472, total: 85899345920, "
        "reserved: 911212544, free: 84933607424, used: 52428800}",
        "  nvmlDeviceGetPciInfo(gpu0) = {busIdLegacy: '0000:01:00.0', domain: 0, bus: 1, device: 0, "
        "pciDeviceId: 0x20b210de, pciSubSystemId: 0x147f10de, busId: '00000000:01:00.0'}",
        "  nvmlDeviceGetEccMode(gpu0) = [1, 1]",
        "  nvmlDeviceGetClockInfo(gpu0, 1) = 1275",
        "  nvmlDeviceGetMaxClockInfo(gpu0, 1) = 1410",
        "  nvmlDeviceGetEnforcedPowerLimit(gpu0) = 500000",
        "  nvmlDeviceGetRemappedRows(gpu0) raised NVMLError_NotSupported (3)",
        "  nvmlDeviceGetNvLinkState(gpu0, 0..11) = 1",
    ):
        assert line in raw.splitlines(), f"{line!r} not in:\n{raw}"
    parsed = _block(hardware, "--- gpu0: parsed DeviceFacts", "NVML facts:")
    for line in (
        f"  name = {A100}",
        "  memory_total_mib = 81920.0",
        "  memory_used_mib = 50.0",
        "  pci_device_id = 10de:20b2",
        "  ecc.mode_current = Enabled",
        "  ecc.remapped_rows_uncorrectable = null",
        "  sm_clock_mhz = 1275.0",
        "  sm_clock_max_mhz = 1410.0",
        "  power_limit_w = 500.0",
        "  nvlink_up = " + json.dumps([True] * 12),
    ):
        assert line in parsed.splitlines(), f"{line!r} not in:\n{parsed}"
    assert "NVML facts: driver 535.54.03, CUDA 12.2, 1 device(s)" in hardware
    assert f"provenance: nvml_version='{STAND_IN_NVML}' binding='nvidia-ml-py " in hardware
    assert f"library='{nvml_stand_in / LIBRARY}'" in hardware
    verdicts = _block(hardware, "nvml: source nvml", "nvidia_smi_q_x:")
    assert re.search(r"^  identity +passed", verdicts, re.MULTILINE), verdicts
    assert not re.search(r"^  \S+ +(failed|error)|^  error:", verdicts, re.MULTILINE), verdicts

    found = re.search(r"gpu-check: results in (\S+)", out_text)
    assert found, output
    out = Path(found.group(1))
    assert out.parent == tmp_path
    files = sorted(p.name for p in out.iterdir())
    # no nvidia-smi here: no nvidia-smi-q-x.xml
    assert files == ["envbuild.lock.json", "hardware.json", "report.json", "run.tar.gz", "torch.json"]
    assert all(p.is_file() for p in out.iterdir())  # nothing in sub-folders: the device tool limits
    torch_json = json.loads((out / "torch.json").read_text(encoding="utf-8"))  # this venv's CPU torch
    assert torch_json["devices"]["devices"] == [] and torch_json["accelerator"]["available"] is False
    assert torch_json["packages"]["builds"]["torch"] == torch_json["accelerator"]["torch_version"]
    captured = json.loads((out / "hardware.json").read_text(encoding="utf-8"))
    assert captured["nvidia_smi_q_x"] is None
    (device,) = captured["nvml"]["devices"]
    assert (device["name"], device["memory_total_mib"]) == (A100, 81920.0)
    assert captured["nvml"]["provenance"]["nvml_version"] == STAND_IN_NVML
    assert {"device": "gpu0", "function": "nvmlDeviceGetName", "args": ["gpu0"], "value": f"= '{A100}'"} in (
        captured["nvml_calls"]
    )
    assert {v["verdict"] for v in captured["verdicts_nvml"]["verdicts"]} <= {"passed", "unjudged"}

    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    stages = {s["stage"]: s for s in report["stages"]}
    for name in ("interpreter", "os", "packages", "accelerator", "devices"):
        assert stages[name]["status"] == "passed", stages[name]
    acc = stages["accelerator"]["facts"]
    assert (acc["driver"], acc["driver_source"], acc["gpu_count"]) == ("535.54.03", "NVML", 1)
    assert [d["name"] for d in stages["devices"]["facts"]["devices"]] == [A100]
    assert stages["devices"]["facts"]["hardware_source"] == "nvml"
    # no GPU behind the stand-in: the container stage names the missing nodes and the flag that exposes them
    container = stages["container"]
    assert container["status"] == "failed" and "/dev/nvidiactl is missing" in container["error"]
    assert "--gpus all" in container["hint"]
    assert report["first_failure"]["stage"] == "container"
    assert report["ok"] is False
    # the report says where the facts came from: a stand-in's cannot pass for a real machine's
    assert report["hardware"]["facts"]["provenance"]["nvml_version"] == STAND_IN_NVML
    assert report["hardware"]["facts"]["provenance"]["library"] == str(nvml_stand_in / LIBRARY)
    # Only the interpreter path in the lock is rewritten to this host's interpreter.
    lock = json.loads((out / "envbuild.lock.json").read_text(encoding="utf-8"))
    assert lock["python_executable"] == sys.executable
    assert lock["backend"] == "cuda" and [t["id"] for t in lock["targets"]] == ["a100-80gb"]
    assert report["lock"]["content"]["python_executable"] == sys.executable

    summary = _block(out_text, "=== summary:", "=== hardware:")
    assert "accelerator: torch None cuda None devices 1 driver 535.54.03 (NVML)" in summary
    assert f"device 0: {A100} None 80.0 GiB" in summary
    assert f"hardware in the report: source nvml, NVML version '{STAND_IN_NVML}'" in summary
    assert "hint: add to `docker run`" in summary  # the summary shows the hint

    assert re.search(r": intact\b", out_text, re.MULTILINE), output  # envbuild report verify passed
    assert re.search(r"^validator exit 1, report verify exit 0; \d+s of the 270s budget$", out_text, re.M)

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


def test_the_device_run_fits_in_five_minutes_and_a_rerun_in_the_session() -> None:
    """The budget arithmetic of the script's header, held to its code: the whole script within
    GPU_CHECK_BUDGET_S plus 5 s for each of the three steps after validate, under the run's documented
    timeout_s of at most 300 s; two such runs, each with a machine start (up to 2 minutes), within the
    15 minutes of device time a session has."""
    text = SCRIPT.read_text(encoding="utf-8")
    timeout_s = int(re.search(r"timeout_s=(\d+)\)", text).group(1))  # type: ignore[union-attr]
    budget = int(re.search(r'BUDGET="\$\{GPU_CHECK_BUDGET_S:-(\d+)\}"', text).group(1))  # type: ignore[union-attr]
    assert budget + 3 * 5 < timeout_s <= 300
    assert 2 * (timeout_s + 120) <= 15 * 60
    assert "--perf-budget 30)" in text
