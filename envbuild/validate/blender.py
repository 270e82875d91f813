"""The ``blender`` stage: Blender itself says its version, Cycles' devices per type, and renders.

The probe (``probes/probe_blender.py``) runs inside the Blender binary for ``blender.source =
"official"`` (``blender --background --factory-startup --python probe_blender.py -- ARGS``) and through
``import bpy`` in the interpreter under test for ``"pypi"``.  It renders Blender's factory startup
scene (cube, light, camera) at :data:`SIZE` x :data:`SIZE` pixels with :data:`SAMPLES` samples and seed
:data:`SEED`, no denoising and no adaptive sampling, first on the CPU (the reference), then on each
declared GPU device type.

The verdict (:func:`decide_blender`, pure):

- the Blender version is the lock's ``blender_version``;
- every declared device type (``blender_devices``; the CPU when none is declared) has at least one
  device Blender can see; one it cannot see fails with the reason, cross-checked with what the vendor
  tools (nvidia-smi / NVML, amd-smi / rocm-smi) see, and what to order or change instead;
- every render finished; the CPU render is neither black nor flat (:data:`MIN_STD`);
- a GPU render matches the CPU render: PSNR >= :data:`PSNR_MIN_DB`.

The PSNR threshold: the same scene, the same seed and sampler give the CPU and the GPU the same sample
pattern, so a working GPU differs from the CPU only by floating-point detail.  Measured with bpy 4.5.15
on the CPU (64x64, 16 samples): the render against the same render with another seed 49.0 dB (two
correct renders that do not even share their noise), against a flat gray of the same mean 21.8 dB,
against black 11.0 dB, against uniform noise 8.4 dB.  30 dB sits between: black, garbage or a
missing object fails, a correct render passes with a wide margin.

The PNGs go into the report folder (``blender-cpu.png``, ``blender-cuda.png``, ...), listed in its
manifest and linked from report.md; the render time per device and the import time are facts.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

from envbuild.models import Lock
from envbuild.report.model import StageResult
from envbuild.validate.host import GpuToolFacts
from envbuild.validate.probe import ProbeResult, probe_path, run_probe, run_probe_argv

SIZE = 64  # pixels per side (at most MAX_SIZE)
MAX_SIZE = 128
SAMPLES = 16
SEED = 0
PSNR_MIN_DB = 30.0
MIN_STD = 0.005  # the CPU render's RGB standard deviation below this: black or flat
BLENDER_IN_IMAGE = "/opt/blender/blender"  # the official build's binary (templates/dockerfiles)
PNG_MAX_BYTES = 4 << 20

NVIDIA_TYPES = ("CUDA", "OPTIX")


def probe_args(lock: Lock, out_dir: Path) -> dict[str, Any]:
    return {
        "devices": list(lock.blender_devices or ("CPU",)),
        "out_dir": str(out_dir),
        "size": SIZE,
        "samples": SAMPLES,
        "seed": SEED,
    }


def blender_binary() -> str | None:
    """The official build's binary: the image's /opt/blender/blender, else ``blender`` on PATH."""
    if Path(BLENDER_IN_IMAGE).is_file():
        return BLENDER_IN_IMAGE
    return shutil.which("blender")


def binary_command(binary: str, args: dict[str, Any]) -> list[str]:
    """How the probe runs inside the Blender binary (the arguments as JSON after ``--``)."""
    script = str(probe_path("blender"))
    return [
        binary,
        "--background",
        "--factory-startup",
        "--python-exit-code",
        "3",
        "--python",
        script,
        "--",
        json.dumps(args),
    ]


def run_blender_probe(lock: Lock, python: str, args: dict[str, Any], timeout_s: float) -> ProbeResult:
    """Run the probe the way the lock installs Blender; never raises for a misbehaving probe."""
    if lock.blender_source == "pypi":
        return run_probe(python, "blender", args, timeout_s)
    # "official", or a lock written before blender.source existed (the tarball was the only source)
    binary = blender_binary()
    if binary is None:
        return ProbeResult(
            "error", reason=f"no Blender binary: neither {BLENDER_IN_IMAGE} nor `blender` on PATH"
        )
    return run_probe_argv("blender", binary_command(binary, args), timeout_s)


def collect_pngs(data: dict[str, Any], out_dir: Path) -> dict[str, bytes]:
    """The rendered PNGs by report file name (``blender-cpu.png``), read from ``out_dir`` only."""
    files: dict[str, bytes] = {}
    for entry in data.get("renders") or []:
        if not isinstance(entry, dict) or not entry.get("png"):
            continue
        name = Path(str(entry["png"])).name
        path = out_dir / name
        if not name.startswith("blender-") or not name.endswith(".png") or not path.is_file():
            continue
        if path.stat().st_size <= PNG_MAX_BYTES:
            files[name] = path.read_bytes()
    return files


def temp_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="envbuild-blender-"))


# ---- the verdict ---------------------------------------------------------------------------------


def _nvidia_gpus(tools: GpuToolFacts | None) -> list[str]:
    if tools is None:
        return []
    for reading in tools.readings:
        if reading.vendor == "nvidia" and reading.devices:
            return [d.name for d in reading.devices]
    return ["an NVIDIA GPU"] * (tools.nvml_device_count or 0)


def _amd_gpus(tools: GpuToolFacts | None) -> list[str]:
    if tools is None:
        return []
    for reading in tools.readings:
        if reading.vendor == "amd" and reading.devices:
            return [d.name for d in reading.devices]
    return []


def _unseen(device: str, data: dict[str, Any], tools: GpuToolFacts | None) -> tuple[str, str]:
    """(error, hint) for a declared device type Blender does not see."""
    compiled = data.get("compiled") or {}
    probe_error = (data.get("device_errors") or {}).get(device)
    if not compiled.get(device, False):
        return (
            f"{device} declared, but this Blender build has no {device} backend (Cycles was built "
            "without it)",
            "install the official Linux build or bpy from PyPI, which carry CUDA, OptiX, HIP and oneAPI",
        )
    if probe_error:
        return (f"{device} declared, but Blender could not list {device} devices: {probe_error}", "")
    if device in NVIDIA_TYPES:
        gpus = _nvidia_gpus(tools)
        if gpus:
            shown = ", ".join(sorted(set(gpus)))
            need = (
                "OptiX needs the driver's OptiX library (NVIDIA_DRIVER_CAPABILITIES with graphics or all) "
                "and a driver at least as new as Blender's OptiX minimum"
                if device == "OPTIX"
                else "CUDA needs the driver's libcuda in the container (started with --gpus)"
            )
            return (
                f"{device} declared, but Blender sees no {device} device although nvidia-smi sees "
                f"{len(gpus)} GPU(s) ({shown})",
                f"{need}; compare the driver with `envbuild check --driver VERSION`",
            )
        return (
            f"{device} declared, but Blender sees no {device} device and no NVIDIA GPU is visible here "
            "(nvidia-smi / NVML found none)",
            f"order a machine with an NVIDIA GPU for {device} (and validate with --gpus all), or declare "
            'blender.devices = ["CPU"] to render on the CPU',
        )
    if device == "HIP":
        gpus = _amd_gpus(tools)
        seen = (
            f" although the ROCm tools see {len(gpus)} GPU(s) ({', '.join(sorted(set(gpus)))})"
            if gpus
            else ""
        )
        return (
            f"HIP declared, but Blender sees no HIP device{seen}",
            "HIP renders on AMD Radeon GPUs Blender ships kernels for (not AMD Instinct); order one, or "
            'declare blender.devices = ["CPU"]',
        )
    return (
        f"{device} declared, but Blender sees no {device} device",
        'oneAPI renders on Intel Arc GPUs only; order one, or declare blender.devices = ["CPU"]',
    )


def _psnr(value: Any) -> float | None:
    if value == "inf":
        return math.inf
    return float(value) if isinstance(value, int | float) else None


def decide_blender(lock: Lock, data: dict[str, Any], tools: GpuToolFacts | None = None) -> StageResult:
    declared = list(lock.blender_devices or ("CPU",))
    renders = {str(r.get("device")): r for r in data.get("renders") or [] if isinstance(r, dict)}
    devices = data.get("devices") or {}
    problems: list[tuple[str, str]] = []
    version = data.get("version")
    if lock.blender_version and version != lock.blender_version:
        problems.append(
            (
                f"Blender {version} is installed, the lock says {lock.blender_version}",
                "rebuild the image from the bundle (envbuild build), or lock the Blender you meant",
            )
        )
    cpu = renders.get("CPU", {})
    if cpu.get("status") != "rendered":
        problems.append((f"CPU: the reference render failed: {cpu.get('error') or 'no render'}", ""))
    elif float(cpu.get("std") or 0.0) < MIN_STD:
        problems.append(
            (
                f"CPU: the render is black or flat (RGB mean {cpu.get('mean')}, standard deviation "
                f"{cpu.get('std')} < {MIN_STD})",
                "see blender-cpu.png in the report",
            )
        )
    for device in declared:
        if device == "CPU":
            continue
        entry = renders.get(device, {})
        if not devices.get(device):
            problems.append(_unseen(device, data, tools))
        elif entry.get("status") != "rendered":
            problems.append((f"{device}: the render failed: {entry.get('error') or 'no render'}", ""))
        else:
            value = _psnr(entry.get("psnr_db"))
            if value is None or value < PSNR_MIN_DB:
                shown = "not computed" if value is None else f"{value:.1f} dB"
                problems.append(
                    (
                        f"{device}: the render does not match the CPU render (PSNR {shown} < "
                        f"{PSNR_MIN_DB:g} dB): black or garbage output",
                        f"compare blender-{device.lower()}.png with blender-cpu.png in the report; a driver "
                        "or kernel problem on this GPU",
                    )
                )
    facts: dict[str, Any] = {
        "mode": data.get("mode"),
        "source": lock.blender_source,
        "version": version,
        "version_string": data.get("version_string"),
        "locked_version": lock.blender_version,
        "import_s": data.get("import_s"),
        "declared": declared,
        "compiled": data.get("compiled"),
        "devices": {k: [d.get("name") for d in v] for k, v in devices.items() if isinstance(v, list)},
        "scene": data.get("scene"),
        "psnr_min_db": PSNR_MIN_DB,
        "renders": [
            {
                **{k: v for k, v in r.items() if k != "png"},
                **({"image": Path(str(r["png"])).name} if r.get("png") else {}),
            }
            for r in data.get("renders") or []
            if isinstance(r, dict)
        ],
    }
    if data.get("device_errors"):
        facts["device_errors"] = data["device_errors"]
    if tools is not None:  # what the vendor tools see beside Blender's own lists
        vendor = {"nvidia": len(_nvidia_gpus(tools)), "amd": len(_amd_gpus(tools))}
        facts["vendor_tools_gpus"] = vendor
        notes = [
            f"Blender sees {len(devices.get(kind) or [])} {kind} device(s), the vendor tools "
            f"{vendor[who]} GPU(s)"
            for kind, who in (("CUDA", "nvidia"), ("OPTIX", "nvidia"), ("HIP", "amd"))
            if kind in declared and 0 < len(devices.get(kind) or []) < vendor[who]
        ]
        if notes:
            facts["fewer_than_vendor_tools"] = notes  # a card Blender skips (too old, or hidden): noted
    if problems:
        error, hint = problems[0]
        if len(problems) > 1:
            facts["problems"] = [p for p, _ in problems]
        return StageResult(stage="blender", status="failed", facts=facts, error=error, hint=hint or None)
    return StageResult(stage="blender", status="passed", facts=facts)
