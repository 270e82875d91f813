"""Pure decisions for the accelerator and devices stages, over torch facts and the vendor tools' readings
(:class:`HardwareFacts`, :mod:`envbuild.validate.host`).

Arch rule (compat-facts §2a): an ``sm_XY`` cubin runs on compute capability X.Z with Z >= Y (same
major only); a PTX entry (``compute_XY`` in ``torch.cuda.get_arch_list()``) JIT-compiles for any
capability >= XY.  ROCm code objects are per gfx target: ``gfx942`` runs only on gfx942.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from envbuild.hardware.tools import tool_name
from envbuild.models import Lock, LockTarget
from envbuild.models.hardware import DeviceFacts, HardwareFacts
from envbuild.report.model import StageResult
from envbuild.validate.decide import result, skipped, version_tuple

MIB = 1024 * 1024
GIB = 1024 * MIB


def _sm(arch: str) -> tuple[int, int] | None:
    m = re.fullmatch(r"(?:sm|compute)_(\d+)(\d)[a-z]?", arch)
    return (int(m.group(1)), int(m.group(2))) if m else None


def arch_covered(arch: str, arch_list: Sequence[str]) -> str | None:
    """How ``arch`` (``sm_90``, ``gfx942``) is served by torch's arch list, or None when it is not."""
    if arch.startswith("gfx"):
        base = arch.split(":")[0]
        return f"code object {base}" if base in {a.split(":")[0] for a in arch_list} else None
    dev = _sm(arch)
    if dev is None:
        return None
    cubins = [
        (cc, e) for e in arch_list if e.startswith("sm_") and (cc := _sm(e)) and cc[0] == dev[0] and cc <= dev
    ]
    if cubins:
        return f"cubin {max(cubins)[1]}"  # the loader picks the closest cubin
    ptx = [(cc, e) for e in arch_list if e.startswith("compute_") and (cc := _sm(e)) and cc <= dev]
    if ptx:
        return f"PTX {max(ptx)[1]} (JIT at first use)"
    return None


def device_arch(dev: dict[str, Any]) -> str:
    """``gfx90a`` from a ROCm device's ``gcnArchName`` (``gfx90a:sramecc+:xnack-``), else ``sm_XY`` from
    its capability.  A ``gcnArchName`` that is no gfx name is ignored: CUDA builds of torch (2.11.0+cu130
    on an H200) give the device's name there."""
    gcn = str(dev.get("gcnArchName") or "").split(":")[0]
    if gcn.startswith("gfx"):
        return gcn
    return f"sm_{dev.get('major')}{dev.get('minor')}"


# -- accelerator ------------------------------------------------------------------------------------


def no_gpu_hint(backend: str, facts: dict[str, Any]) -> str:
    nodes: list[str] = list(facts.get("dev_nodes", []))
    env: dict[str, str | None] = dict(facts.get("env", {}))
    causes: list[str] = []
    if backend == "cuda":
        if not any(n.startswith("/dev/nvidia") for n in nodes):
            causes.append(
                "no /dev/nvidia* device nodes: the container was started without GPUs; "
                "start it with `docker run --gpus all ...` (NVIDIA Container Toolkit)"
            )
            nv = env.get("NVIDIA_VISIBLE_DEVICES")
            if nv is None:
                causes.append("NVIDIA_VISIBLE_DEVICES is unset, so the NVIDIA runtime exposed no GPU")
        nv = env.get("NVIDIA_VISIBLE_DEVICES")
        if nv is not None and nv.strip().lower() in ("", "void", "none"):
            causes.append(f"NVIDIA_VISIBLE_DEVICES={nv!r} hides every GPU")
        cvd = env.get("CUDA_VISIBLE_DEVICES")
        if cvd is not None and cvd.strip() in ("", "-1"):
            causes.append(f"CUDA_VISIBLE_DEVICES={cvd!r} hides every GPU from CUDA")
    else:
        if "/dev/kfd" not in nodes:
            causes.append(
                "/dev/kfd is absent: start the container with "
                "`docker run --device=/dev/kfd --device=/dev/dri --group-add video ...`"
            )
        elif not any(n.startswith("/dev/dri/renderD") for n in nodes):
            causes.append("no /dev/dri/renderD* nodes: add `--device=/dev/dri` to docker run")
        for var in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
            val = env.get(var)
            if val is not None and val.strip() in ("", "-1"):
                causes.append(f"{var}={val!r} hides every GPU")
    if facts.get("init_error"):
        causes.append(f"torch says: {facts['init_error']}")
    if not causes:
        causes.append(
            "device nodes are present but torch sees no GPU: check the driver with nvidia-smi / amd-smi"
        )
    return "; ".join(causes)


def decide_accelerator(
    lock: Lock, facts: dict[str, Any], driver: str | None, driver_source: str | None
) -> StageResult:
    cuda, hip = facts.get("cuda"), facts.get("hip")
    count = int(facts.get("device_count") or 0)
    shown = {
        "torch_version": facts.get("torch_version"),
        "torch_cuda": cuda,
        "torch_hip": hip,
        "device_count": count,
        "driver": driver,
        "driver_source": driver_source,
        "min_driver": lock.min_driver,
        "dev_nodes": facts.get("dev_nodes", []),
    }
    if facts.get("torch_import_error"):
        return result("accelerator", f"import torch failed: {facts['torch_import_error']}", None, **shown)
    if lock.backend == "cpu":
        shown["gpu_seen"] = count > 0 or bool(driver)
        if lock.torch_variant == "cpu" and (cuda or hip):
            build = f"CUDA {cuda}" if cuda else f"ROCm {hip}"
            return result(
                "accelerator", f"torch is a {build} build; the lock declares the cpu variant", None, **shown
            )
        return result("accelerator", **shown)
    want = lock.accelerator_version or ""
    have = cuda if lock.backend == "cuda" else hip
    label = "CUDA" if lock.backend == "cuda" else "ROCm"
    if not have:
        other = f"CUDA {cuda}" if cuda else f"ROCm {hip}" if hip else "cpu"
        return result(
            "accelerator",
            f"torch is a {other} build; the lock declares {label} {want}",
            "reinstall torch from the bundle (its index URL selects the variant)",
            **shown,
        )
    if want and not (have == want or str(have).startswith(want + ".")):
        return result(
            "accelerator",
            f"torch is built for {label} {have}; the lock declares {label} {want}",
            None,
            **shown,
        )
    if count == 0:
        return result(
            "accelerator",
            f"{lock.backend} lock but no GPU is visible to torch",
            no_gpu_hint(lock.backend, facts),
            **shown,
        )
    if lock.backend == "cuda" and driver is None:
        return result(
            "accelerator",
            "NVIDIA driver version unknown: neither NVML (libnvidia-ml.so.1) nor nvidia-smi answered",
            "start the container with `--gpus all` so the driver libraries are mounted",
            **shown,
        )
    if lock.min_driver and driver and version_tuple(driver) < version_tuple(lock.min_driver):
        return result(
            "accelerator",
            f"driver {driver} is older than {lock.min_driver}, the minimum for {label} {want}",
            "ask the provider for a newer driver, or render the profile for an older toolkit variant",
            **shown,
        )
    return result("accelerator", **shown)


def decide_accelerator_without_torch(
    lock: Lock, gpu_count: int, driver: str | None, driver_source: str | None
) -> StageResult:
    """A lock without torch (ubuntu / blender profiles): the vendor tools are the only witnesses."""
    facts = {"torch": None, "gpu_count": gpu_count, "driver": driver, "driver_source": driver_source}
    if lock.backend == "cpu":
        return skipped("accelerator", "cpu lock without torch: no accelerator to check", **facts)
    if gpu_count == 0:
        return result(
            "accelerator",
            f"{lock.backend} lock but the vendor tools see no GPU",
            no_gpu_hint(lock.backend, {"dev_nodes": [], "env": {}}),
            **facts,
        )
    if lock.min_driver and driver and version_tuple(driver) < version_tuple(lock.min_driver):
        return result("accelerator", f"driver {driver} is older than {lock.min_driver}", None, **facts)
    return result("accelerator", **facts)


# -- devices ----------------------------------------------------------------------------------------


def match_target(dev: dict[str, Any], targets: Sequence[LockTarget]) -> LockTarget | None:
    """The declared card a device is: same arch, memory within [-15%, +5%] of the catalog figure for one
    device (an MI250X card is two devices of 64 GiB)."""
    arch = device_arch(dev)
    gib = float(dev.get("total_memory", 0)) / GIB
    for target in targets:
        per_device = target.memory_per_device
        if target.arch == arch and 0.85 * per_device <= gib <= 1.05 * per_device:
            return target
    return None


def _norm_uuid(text: str | None) -> str | None:
    return text.lower().removeprefix("gpu-") if text else None


def smi_disagreements(
    devices: Sequence[dict[str, Any]], reading: HardwareFacts, restricted: bool
) -> list[str]:
    out: list[str] = []
    tool, listed = tool_name(reading.source), reading.devices
    if (len(listed) != len(devices)) and not (restricted and len(devices) < len(listed)):
        out.append(f"{tool} lists {len(listed)} GPU(s), torch sees {len(devices)}")
        return out
    by_uuid = {_norm_uuid(d.uuid): d for d in listed if d.uuid}
    for n, dev in enumerate(devices):
        smi: DeviceFacts | None = by_uuid.get(_norm_uuid(dev.get("uuid")))
        if smi is None:
            if restricted:
                continue
            smi = listed[n]
        tname, sname = str(dev.get("name", "")).lower(), smi.name.lower()
        if tname and sname and tname not in sname and sname not in tname:
            out.append(f"device {n}: torch name {dev.get('name')!r}, {tool} name {smi.name!r}")
        if smi.memory_total_mib and dev.get("total_memory"):
            tmib = float(dev["total_memory"]) / MIB
            if abs(tmib - smi.memory_total_mib) > 0.02 * smi.memory_total_mib:
                out.append(f"device {n}: torch memory {tmib:.0f} MiB, {tool} {smi.memory_total_mib:.0f} MiB")
        if smi.arch and smi.arch != device_arch(dev):
            out.append(f"device {n}: torch arch {device_arch(dev)}, {tool} arch {smi.arch}")
    return out


def decide_devices(
    lock: Lock, facts: dict[str, Any], readings: Sequence[HardwareFacts], restricted: bool = False
) -> StageResult:
    """``readings``: the vendor tools' (:class:`envbuild.validate.host.GpuToolFacts`); the first of the
    lock's vendor is compared with what torch sees."""
    if lock.backend == "cpu":
        return skipped("devices", "cpu lock: no accelerator devices to check")
    devices: list[dict[str, Any]] = list(facts.get("devices", []))
    arch_list: list[str] = list(facts.get("arch_list", []))
    problems: list[str] = []
    rows = []
    for dev in devices:
        arch = device_arch(dev)
        how = arch_covered(arch, arch_list)
        target = match_target(dev, lock.targets)
        rows.append(
            {
                "index": dev.get("index"),
                "name": dev.get("name"),
                "arch": arch,
                "memory_gib": round(float(dev.get("total_memory", 0)) / GIB, 2),
                "sms": dev.get("multi_processor_count"),
                "uuid": dev.get("uuid"),  # torch's, when it has one: tells the cards of a fleet apart
                "covered_by": how,
                "target": target.id if target else None,
            }
        )
        if how is None:
            problems.append(
                f"device {dev.get('index')} ({dev.get('name')}, {arch}) has no kernels in torch "
                f"(arch list: {' '.join(arch_list) or 'empty'})"
            )
        if lock.targets and target is None:
            declared = ", ".join(f"{t.name} ({t.arch}, {t.memory_gib:g} GiB)" for t in lock.targets)
            problems.append(
                f"device {dev.get('index')} is {dev.get('name')} ({arch}, "
                f"{rows[-1]['memory_gib']} GiB), not a declared card: {declared}"
            )
    if len(devices) < max(lock.gpus, 1):
        problems.append(f"{len(devices)} device(s) visible; the job needs {lock.gpus}")
    for target in lock.targets:
        n = sum(1 for r in rows if r["target"] == target.id)
        if n and n % target.devices_per_lot:
            unit = (
                "cards" if target.devices_per_card == 1 else f"devices ({target.devices_per_card} per card)"
            )
            problems.append(f"{n} {target.name} visible; a lot has {target.devices_per_lot} {unit}")
    vendor = "nvidia" if lock.backend == "cuda" else "amd"
    reading = next((r for r in readings if r.vendor == vendor), None)
    agreement = "not checked: no vendor tool answered" if reading is None else "agrees"
    if reading is not None:
        disagree = smi_disagreements(devices, reading, restricted)
        problems += disagree
        agreement = "; ".join(disagree) or f"agrees with {tool_name(reading.source)}"
    facts_out = {"count": len(devices), "arch_list": arch_list, "devices": rows, "smi_agreement": agreement}
    if not problems:
        return result("devices", **facts_out)
    return result(
        "devices", "; ".join(problems), "compare with the order: card model, lots, cards per lot", **facts_out
    )
