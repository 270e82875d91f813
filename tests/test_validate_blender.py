"""The ``blender`` validate stage: its verdict, its report pictures, its wiring, and how the probe runs.

Fixtures:

- ``tests/data/blender/probe-bpy-4.5.15-cpu-only.json`` and ``blender-cpu.png`` were RECORDED: the output
  of ``envbuild/validate/probes/probe_blender.py`` run through ``import bpy`` (bpy 4.5.15 from PyPI,
  Python 3.11) on this CPU-only machine with devices CPU, CUDA, OPTIX, and the PNG it rendered.
- Everything that needs a GPU (a CUDA device list, a GPU render and its PSNR, nvidia-smi / rocm-smi
  seeing cards, a build without a backend) is WRITTEN BY HAND below from the recorded output: no GPU
  was available to record it.  The probe's GPU branch itself runs only on a machine with one.
- The stand-in ``blender`` executable and the stand-in probe (``ENVBUILD_PROBE_BLENDER``) are written
  by hand too: they check the plumbing (arguments after ``--``, PNGs into the report), not Blender.
"""

from __future__ import annotations

import copy
import json
import os
import stat
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from envbuild.models import Lock
from envbuild.models.hardware import DeviceFacts, HardwareFacts
from envbuild.report.verify import verify_report
from envbuild.validate import blender, run_validation
from envbuild.validate.host import GpuToolFacts

DATA = Path(__file__).parent / "data" / "blender"
RECORDED = json.loads((DATA / "probe-bpy-4.5.15-cpu-only.json").read_text())
PNG = (DATA / "blender-cpu.png").read_bytes()


def blender_lock(devices: tuple[str, ...] = ("CPU",), **update: Any) -> Lock:
    """``envbuild render``'s lock for the built-in ``blender-cpu`` profile, with other devices."""
    from envbuild.plan import check
    from envbuild.profile import load_profile
    from envbuild.render import make_lock

    lock = make_lock(check(load_profile("blender-cpu")).plan)
    return replace(lock, blender_devices=devices, **update)


def recorded(**renders: dict[str, Any]) -> dict[str, Any]:
    """The recorded probe output; ``renders`` replace or add entries by device (hand-written)."""
    data = copy.deepcopy(RECORDED)
    by_device = {r["device"]: r for r in data["renders"]}
    by_device.update({k: {"device": k, **v} for k, v in renders.items()})
    data["renders"] = list(by_device.values())
    return data


def with_cuda_device(data: dict[str, Any]) -> dict[str, Any]:
    """Hand-written: Blender lists one CUDA device (the tuple layout _cycles.available_devices gives)."""
    data["devices"]["CUDA"] = [
        {"name": "NVIDIA H100 80GB HBM3", "type": "CUDA", "id": "CUDA_NVIDIA H100_0000:01:00"}
    ]
    return data


def nvidia_tools(*names: str) -> GpuToolFacts:
    """Hand-written: what nvidia-smi's reading would hold on a machine with these cards."""
    devices = tuple(DeviceFacts(index=i, name=n) for i, n in enumerate(names))
    reading = HardwareFacts(
        source="nvidia-smi --query-gpu", vendor="nvidia", driver_version="570.86.15", devices=devices
    )
    return GpuToolFacts(readings=[reading])


# ---- the verdict -------------------------------------------------------------------------------------


def test_recorded_cpu_render_passes() -> None:
    res = blender.decide_blender(blender_lock(), RECORDED)
    assert res.status == "passed", res.error
    assert res.facts["version"] == "4.5.15" and res.facts["mode"] == "module"
    assert res.facts["devices"]["CPU"] == ["AMD EPYC"] and res.facts["devices"]["CUDA"] == []
    (cpu,) = [r for r in res.facts["renders"] if r["device"] == "CPU"]
    assert cpu["image"] == "blender-cpu.png" and "png" not in cpu  # the report's file name, not a temp path


def test_cuda_declared_without_any_gpu_names_cuda_and_what_to_order() -> None:
    res = blender.decide_blender(blender_lock(("CPU", "CUDA")), RECORDED, GpuToolFacts())
    assert res.status == "failed"
    assert res.error == (
        "CUDA declared, but Blender sees no CUDA device and no NVIDIA GPU is visible here "
        "(nvidia-smi / NVML found none)"
    )
    assert res.hint is not None and "order a machine with an NVIDIA GPU for CUDA" in res.hint
    assert 'blender.devices = ["CPU"]' in res.hint


def test_every_unseen_device_is_listed() -> None:
    res = blender.decide_blender(blender_lock(("CPU", "CUDA", "OPTIX")), RECORDED, GpuToolFacts())
    assert res.error is not None and res.error.startswith("CUDA declared")
    assert [p.split(",")[0] for p in res.facts["problems"]] == ["CUDA declared", "OPTIX declared"]


def test_gpu_seen_by_nvidia_smi_but_not_by_blender() -> None:
    tools = nvidia_tools("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3")
    res = blender.decide_blender(blender_lock(("OPTIX",)), RECORDED, tools)
    assert res.status == "failed"
    assert res.error == (
        "OPTIX declared, but Blender sees no OPTIX device although nvidia-smi sees 2 GPU(s) "
        "(NVIDIA H100 80GB HBM3)"
    )
    assert res.hint is not None and "OptiX library" in res.hint and "envbuild check --driver" in res.hint


def test_a_build_without_the_backend() -> None:
    data = recorded()
    data["compiled"]["HIP"] = False
    res = blender.decide_blender(blender_lock(("HIP",)), data)
    assert (
        res.error == "HIP declared, but this Blender build has no HIP backend (Cycles was built without it)"
    )


def test_hip_on_an_instinct_seen_by_rocm_smi() -> None:
    tools = GpuToolFacts(
        readings=[
            HardwareFacts(
                source="rocm-smi", vendor="amd", devices=(DeviceFacts(index=0, name="AMD Instinct MI300X"),)
            )
        ]
    )
    res = blender.decide_blender(blender_lock(("HIP",)), RECORDED, tools)
    assert res.error == (
        "HIP declared, but Blender sees no HIP device although the ROCm tools see 1 GPU(s) "
        "(AMD Instinct MI300X)"
    )
    assert res.hint is not None and "not AMD Instinct" in res.hint


@pytest.mark.parametrize(
    ("psnr", "ok"),
    [(45.3, True), ("inf", True), (30.0, True), (29.9, False), (11.0, False), (None, False)],
)
def test_gpu_render_against_the_cpu_render(psnr: Any, ok: bool) -> None:
    gpu = {
        "status": "rendered",
        "render_s": 0.02,
        "png": "/tmp/x/blender-cuda.png",
        "mean": 0.27,
        "std": 0.08,
    }
    if psnr is not None:
        gpu["psnr_db"] = psnr
    data = with_cuda_device(recorded(CUDA=gpu))
    res = blender.decide_blender(blender_lock(("CPU", "CUDA")), data)
    assert (res.status == "passed") is ok, res.error
    if not ok:
        assert res.error is not None and res.error.startswith(
            "CUDA: the render does not match the CPU render"
        )
        assert "black or garbage" in res.error and "30 dB" in res.error


def test_a_failed_gpu_render() -> None:
    data = with_cuda_device(
        recorded(CUDA={"status": "error", "error": "RuntimeError: CUDA error: out of memory"})
    )
    res = blender.decide_blender(blender_lock(("CUDA",)), data)
    assert res.error == "CUDA: the render failed: RuntimeError: CUDA error: out of memory"


def test_black_cpu_render_fails() -> None:
    data = recorded(
        CPU={"status": "rendered", "render_s": 0.1, "png": "/t/blender-cpu.png", "mean": 0.0, "std": 0.0}
    )
    res = blender.decide_blender(blender_lock(), data)
    assert res.status == "failed" and res.error is not None and "black or flat" in res.error


def test_version_differs_from_the_lock() -> None:
    res = blender.decide_blender(blender_lock(blender_version="4.5.14"), RECORDED)
    assert res.error == "Blender 4.5.15 is installed, the lock says 4.5.14"


# ---- how the probe runs ------------------------------------------------------------------------------


def test_binary_command_runs_the_same_script_after_double_dash() -> None:
    argv = blender.binary_command("/opt/blender/blender", {"devices": ["CPU"], "size": 64})
    assert argv[:4] == ["/opt/blender/blender", "--background", "--factory-startup", "--python-exit-code"]
    assert argv[-4] == "--python" and Path(argv[-3]).name == "probe_blender.py" and argv[-2] == "--"
    assert json.loads(argv[-1]) == {"devices": ["CPU"], "size": 64}


STAND_IN_PROBE = f"""\
import json, sys, pathlib
args = json.loads(sys.argv[sys.argv.index("--") + 1]) if "--" in sys.argv else json.loads(sys.stdin.read())
data = json.loads(pathlib.Path({str(DATA / "probe-bpy-4.5.15-cpu-only.json")!r}).read_text())
data["renders"] = [r for r in data["renders"] if r["device"] in args["devices"] or r["device"] == "CPU"]
out = pathlib.Path(args["out_dir"]) / "blender-cpu.png"
out.write_bytes(pathlib.Path({str(DATA / "blender-cpu.png")!r}).read_bytes())
data["renders"][0]["png"] = str(out)
data["argv_mode"] = "after --" if "--" in sys.argv else "stdin"
print("Fra:1 chatter a real Blender prints")
print("ENVBUILD-RESULT " + json.dumps(data))
"""


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    script = tmp_path / "stand_in_probe.py"
    script.write_text(STAND_IN_PROBE)
    monkeypatch.setenv("ENVBUILD_PROBE_BLENDER", str(script))
    return script


def test_stage_puts_the_render_in_the_report(stand_in: Path, tmp_path: Path) -> None:
    lock = blender_lock(python_executable=sys.executable)
    report, run_dir = run_validation(
        lock, python=sys.executable, out=tmp_path / "runs", stages=["blender"], keep_going=True
    )
    res = report.stage("blender")
    assert res.status == "passed", res.error
    assert (run_dir / "blender-cpu.png").read_bytes() == PNG
    assert "  blender-cpu.png\n" in (run_dir / "MANIFEST.sha256").read_text()
    md = (run_dir / "report.md").read_text()
    assert "[blender-cpu.png](blender-cpu.png)" in md and "![CPU render](blender-cpu.png)" in md
    assert verify_report(run_dir) == []
    (run_dir / "blender-cpu.png").write_bytes(PNG.replace(b"IDAT", b"IDAU", 1))
    assert verify_report(run_dir) == ["changed: blender-cpu.png"]


def test_official_source_runs_the_probe_inside_the_blender_binary(
    stand_in: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hand-written ``blender`` on PATH runs the probe as Blender would: Python, the args after ``--``."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "blender"
    fake.write_text(
        "#!/bin/sh\n"
        '[ "$1 $2 $3 $4 $5" = "--background --factory-startup --python-exit-code 3 --python" ] || exit 9\n'
        f'shift 5\nexec {sys.executable} "$@"\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(blender, "BLENDER_IN_IMAGE", str(tmp_path / "absent"))
    lock = blender_lock(blender_source="official")
    report, run_dir = run_validation(
        lock, python=sys.executable, out=tmp_path / "runs", stages=["blender"], keep_going=True
    )
    res = report.stage("blender")
    assert res.status == "passed", (res.error, res.facts)
    assert (run_dir / "blender-cpu.png").is_file()


def test_official_source_without_a_binary_fails_with_the_reason(
    stand_in: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(blender, "BLENDER_IN_IMAGE", str(tmp_path / "absent"))
    lock = blender_lock(blender_source="official")
    report, _ = run_validation(
        lock, python=sys.executable, out=tmp_path / "runs", stages=["blender"], keep_going=True
    )
    res = report.stage("blender")
    assert res.status == "failed"
    assert (
        res.error is not None and "no Blender binary" in res.error and "/opt/blender/blender" not in res.error
    )


def test_a_lock_without_blender_has_no_blender_stage(tmp_path: Path) -> None:
    from validate_support import cpu_lock

    lock = cpu_lock(tmp_path)
    report, _ = run_validation(lock, python=sys.executable, out=tmp_path / "runs", stages=["os"])
    assert [s.stage for s in report.stages] == ["os"]
    report, _ = run_validation(lock, python=sys.executable, out=tmp_path / "runs2", stages=["blender"])
    skipped = report.stage("blender")
    assert (
        skipped.status == "skipped"
        and skipped.facts["reason"] == "the lock declares no Blender: not applicable"
    )


def test_report_takes_only_blender_pngs(tmp_path: Path) -> None:
    from envbuild.report.write import write_report

    lock = blender_lock()
    report, _ = run_validation(lock, python=sys.executable, out=tmp_path / "runs", stages=["os"])
    run_dir = tmp_path / "copy"
    run_dir.mkdir()
    write_report(run_dir, report, {}, {}, {"blender-cpu.png": PNG, "../evil.png": b"x", "notes.txt": b"x"})
    assert sorted(p.name for p in run_dir.iterdir() if p.suffix == ".png") == ["blender-cpu.png"]
    assert verify_report(run_dir) == []


def test_blender_seeing_fewer_cards_than_nvidia_smi_is_noted() -> None:
    data = with_cuda_device(
        recorded(CUDA={"status": "rendered", "render_s": 0.02, "png": "/t/blender-cuda.png", "psnr_db": 44.0})
    )
    res = blender.decide_blender(
        blender_lock(("CUDA",)), data, nvidia_tools("NVIDIA H100 80GB HBM3", "Tesla K80")
    )
    assert res.status == "passed"
    assert res.facts["vendor_tools_gpus"] == {"nvidia": 2, "amd": 0}
    assert res.facts["fewer_than_vendor_tools"] == [
        "Blender sees 1 CUDA device(s), the vendor tools 2 GPU(s)"
    ]
