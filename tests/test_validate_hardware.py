"""``validate`` judges the live hardware with the rules of ``check --smi`` (issue 26).

No GPU here: NVML does not initialise, so the vendor tools answer, as scripts on PATH that print real
captures (tests/fixtures/smi/real, see SOURCES.md) when asked the command the validator runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from validate_support import fake_tool, gpu_lock

from envbuild.boundary import to_json
from envbuild.hardware.nvidia_xml import parse_nvidia_xml
from envbuild.models import Lock, LockTarget
from envbuild.validate import run_validation
from envbuild.validate.decide import result
from envbuild.validate.hardware_stage import hardware_only, judge_live, with_hardware

REAL = Path(__file__).parent / "fixtures" / "smi" / "real"
FLAGS = ("--keep-going", "--stages", "devices")


def lock_without_torch(backend: str, target: LockTarget) -> Lock:
    """A GPU lock without torch (an ubuntu profile) for this interpreter: only the vendor tools see
    the devices, so the devices stage is the hardware verdict alone."""
    here = "{}.{}".format(*sys.version_info[:2])
    lock = gpu_lock(
        backend,
        [],
        profile_kind="ubuntu",
        torch_version=None,
        torch_variant=None,
        min_driver=None,
        python_executable=sys.executable,
        python_version=here,
        os="debian12",
        os_release_id="debian",
        os_release_version="12",
        required_archs=(target.arch,),
    )
    return replace(lock, targets=(target,))


A100 = LockTarget(
    id="a100-80gb", name="NVIDIA A100 80GB", vendor="nvidia", arch="sm_80", memory_gib=80, cards_per_lot=1
)
MI300X = LockTarget(
    id="mi300x", name="AMD Instinct MI300X", vendor="amd", arch="gfx942", memory_gib=192, cards_per_lot=1
)


def test_validate_fails_devices_on_a_mig_card_read_through_nvidia_smi(tmp_path: Path) -> None:
    """A real `envbuild validate` (a subprocess) against a CUDA lock for an A100 80GB; nvidia-smi -q -x
    prints a real A100 capture with MIG enabled (a100-sxm4-v12.xml)."""
    tools = fake_tool(tmp_path / "bin", "nvidia-smi", REAL / "nvidia-smi-q-x" / "a100-sxm4-v12.xml", "-q -x")
    lock = tmp_path / "envbuild.lock.json"
    lock.write_text(to_json(lock_without_torch("cuda", A100)), encoding="utf-8")
    env = {**os.environ, "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from envbuild.cli import main; main()",
            "validate",
            "--lock",
            str(lock),
            *FLAGS,
            "--out",
            str(tmp_path / "runs"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (run,) = (tmp_path / "runs").iterdir()
    report = json.loads((run / "report.json").read_text(encoding="utf-8"))
    devices = next(s for s in report["stages"] if s["stage"] == "devices")
    assert devices["status"] == "failed"
    assert devices["error"].startswith(
        "E-HW-MIG: device 0 (NVIDIA A100-SXM4-80GB): MIG is enabled; its 4 MIG"
    )
    assert devices["hint"].startswith("ask the provider to disable MIG (`sudo nvidia-smi -i 0 -mig 0`")
    assert devices["facts"]["devices"][0]["memory_gib"] == 80.0
    assert devices["facts"]["hardware_unjudged"] == ["NVLink: not reported by nvidia-smi -q -x"]
    hardware = report["hardware"]
    assert hardware["source"] == "nvidia-smi -q -x"
    assert hardware["facts"]["driver_version"] == "535.54.03"
    assert hardware["facts"]["devices"][0]["pci_device_id"] == "10de:20b2"
    verdicts = {v["rule"]: v["verdict"] for v in hardware["verdicts"]}
    assert verdicts["identity"] == "passed" and verdicts["partitioning"] == "error"
    assert verdicts["nvlink"] == "unjudged"
    md = (run / "report.md").read_text(encoding="utf-8")
    assert "## Hardware" in md and "| partitioning | **error** | E-HW-MIG |" in md


def test_a_rocm_lock_reads_rocm_smi_and_names_the_wrong_card(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rocm-smi (no amd-smi) prints a real capture of 4 x MI100 for an MI300X order."""
    tools = fake_tool(tmp_path / "bin", "rocm-smi", REAL / "rocm-smi" / "mi100_rocm602.json")
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    lock = replace(lock_without_torch("rocm", MI300X), min_driver=None)
    report, _ = run_validation(
        lock, out=tmp_path / "runs", stages=["devices"], keep_going=True, workdir=tmp_path
    )
    devices = report.stage("devices")
    assert devices.status == "failed"
    assert devices.error is not None and devices.error.startswith("E-HW-IDENTITY: device 0 (")
    assert "(and 3 more hardware error(s): see hardware)" in devices.error
    assert report.hardware is not None and report.hardware["source"] == "rocm-smi"
    assert len(report.hardware["facts"]["devices"]) == 4


def test_own_processes_are_left_out_and_warnings_do_not_fail() -> None:
    """The T4 capture lists Xorg (pid 675) and python (pid 5762): as the validator's own process,
    python is not another tenant's.  Its narrowed link and Xorg are warnings; the stage passes."""
    t4 = parse_nvidia_xml((REAL / "nvidia-smi-q-x" / "tesla-t4.xml").read_text(encoding="utf-8"), "t4")
    lock = gpu_lock("cuda", [])
    hw = judge_live(lock, t4, pids={5762}, in_container=False)
    res = with_hardware(result("devices", count=1), hw)
    assert res.status == "passed"
    warned = res.facts["warnings"]
    assert [w.split(":")[0] for w in warned] == ["W-HW-PCIE-WIDTH", "W-HW-PROCESSES"]
    assert (
        "1 other process(es) hold 0.0 GiB: /usr/lib/xorg/Xorg (0.0 GiB)" in warned[1]
        and "python" not in warned[1]
    )
    assert res.hint == "; ".join(warned)
    assert (
        "identity: no target card ordered (accelerator.targets or --target)" in res.facts["hardware_unjudged"]
    )


def test_no_vendor_tool_is_said_never_passed() -> None:
    lock = gpu_lock("cuda", ["h100"])
    silent = judge_live(lock, None)
    with_torch = with_hardware(result("devices", count=1), silent)
    assert with_torch.status == "passed"  # torch saw the devices; the hardware is not judged
    assert with_torch.facts["warnings"] == [
        "hardware not judged: no vendor tool answered (NVML (nvidia-ml-py), nvidia-smi -q -x)"
    ]
    alone = hardware_only(replace(lock, torch_version=None), silent)
    assert alone.status == "failed" and alone.error is not None
    assert alone.error.startswith("no vendor tool answered (NVML (nvidia-ml-py), nvidia-smi -q -x)")
    assert "NVIDIA_DRIVER_CAPABILITIES" in (alone.hint or "")
    assert silent.section()["facts"] is None and silent.section()["unjudged"]


def test_report_diff_and_fleet_compare_the_hardware(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two validations of an A100: the real capture (MIG enabled), then one derived from it (labelled:
    no public capture shows it) with MIG disabled and the power limit cut to 400 W."""
    from envbuild.report.diff import diff_reports
    from envbuild.report.fleet import load_fleet
    from envbuild.report.verify import load_report

    real = REAL / "nvidia-smi-q-x" / "a100-sxm4-v12.xml"
    derived = tmp_path / "a100-derived.xml"  # derived: MIG off, power limit lowered
    text = real.read_text(encoding="utf-8")
    text = text.replace("<current_mig>Enabled</current_mig>", "<current_mig>Disabled</current_mig>")
    derived.write_text(text.replace("<current_power_limit>500.00 W", "<current_power_limit>400.00 W", 1))
    runs = []
    for n, capture in enumerate((real, derived)):
        tools = fake_tool(tmp_path / f"bin{n}", "nvidia-smi", capture, "-q -x")
        monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
        lock = lock_without_torch("cuda", A100)
        runs.append(run_validation(lock, out=tmp_path / "runs", stages=["devices"], keep_going=True)[1])
    lines = diff_reports(load_report(runs[0]), load_report(runs[1]))
    assert "hardware device 0 MIG / partition: Enabled (4 instances) -> Disabled" in lines
    assert "hardware device 0 power limit: 500 W (default 500 W) -> 400 W (default 500 W)" in lines
    assert "hardware rule partitioning: error -> passed" in lines
    assert "hardware rule power: passed -> warning" in lines
    fleet = load_fleet(runs)
    assert [lot.hardware for lot in fleet.lots] == ["E-HW-MIG", "W-HW-POWER-LIMIT"]
    assert any(o.column == "hardware" for o in fleet.outliers)  # two lots, no majority
