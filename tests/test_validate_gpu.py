"""CUDA / ROCm decisions fed with recorded facts (tests/fixtures/torch, tests/fixtures/smi).

The same decision functions run on a live machine; only the facts come from fixtures here.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from validate_support import gpu_lock, smi_text, torch_fixture

from envbuild.hardware.amd import parse_amd_smi, parse_rocm_smi
from envbuild.hardware.nvidia_query import parse_query_gpu
from envbuild.hardware.nvidia_xml import parse_nvidia_xml
from envbuild.models import Lock
from envbuild.models.hardware import HardwareFacts
from envbuild.validate.gpu import arch_covered, decide_accelerator, decide_devices

CU128 = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"]


@pytest.mark.parametrize(
    ("arch", "arch_list", "expected"),
    [
        ("sm_90", CU128, "cubin sm_90"),
        ("sm_89", CU128, "cubin sm_86"),  # Ada runs Ampere sm_86 cubins (same major, newer minor)
        ("sm_100", CU128, "cubin sm_100"),
        ("sm_100", ["sm_80", "sm_86", "sm_90"], None),  # sm_90 cubins do not run on Blackwell
        ("sm_80", ["sm_86", "sm_90"], None),  # an older minor cannot run a newer minor's cubin
        ("sm_121", CU128, "cubin sm_120"),
        ("sm_100", ["sm_90", "compute_90"], "PTX compute_90 (JIT at first use)"),
        ("sm_75", ["sm_80", "compute_80"], None),  # PTX only JITs forward
        ("gfx942", ["gfx90a", "gfx942"], "code object gfx942"),
        ("gfx942", ["gfx900", "gfx906", "gfx908", "gfx90a", "gfx1030", "gfx1100"], None),  # rocm5.x wheels
    ],
)
def test_arch_coverage_rules(arch: str, arch_list: list[str], expected: str | None) -> None:
    assert arch_covered(arch, arch_list) == expected


def _nvidia(name: str) -> HardwareFacts:
    return parse_nvidia_xml(smi_text(name), "nvidia-smi -q -x")


def test_h100_passes_accelerator_and_devices() -> None:
    lock = gpu_lock("cuda", ["h100"])
    facts = torch_fixture("h100-torch2.7.1-cu128.json")
    view = _nvidia("nvidia-smi-q-x-h100.xml")
    acc = decide_accelerator(lock, facts["accelerator"], view.driver_version, "nvidia-smi")
    assert acc.status == "passed", acc.error
    dev = decide_devices(lock, facts["devices"], [view])
    assert dev.status == "passed", dev.error
    assert dev.facts["devices"][0]["covered_by"] == "cubin sm_90"
    assert dev.facts["devices"][0]["target"] == "h100"
    assert dev.facts["smi_agreement"] == "agrees with nvidia-smi"


def test_h100_delivered_for_an_h200_order_is_named() -> None:
    lock = gpu_lock("cuda", ["h200"])
    facts = torch_fixture("h100-torch2.7.1-cu128.json")
    res = decide_devices(lock, facts["devices"], [_nvidia("nvidia-smi-q-x-h100.xml")])
    assert res.status == "failed"
    assert "is NVIDIA H100 80GB HBM3 (sm_90, 79.65 GiB), not a declared card" in (res.error or "")


def test_h200_matches_its_own_order() -> None:
    lock = gpu_lock("cuda", ["h200"])
    facts = torch_fixture("h200-torch2.7.1-cu128.json")
    res = decide_devices(lock, facts["devices"], [_nvidia("nvidia-smi-q-x-h200.xml")])
    assert res.status == "passed", res.error


def test_b200_lot_of_two_passes_with_cu128() -> None:
    lock = gpu_lock("cuda", ["b200"], gpus=2)
    facts = torch_fixture("b200x2-torch2.7.1-cu128.json")
    res = decide_devices(lock, facts["devices"], [_nvidia("nvidia-smi-q-x-b200x2.xml")])
    assert res.status == "passed", res.error
    assert res.facts["count"] == 2


def test_b200_with_cu126_wheel_has_no_kernels() -> None:
    lock = gpu_lock("cuda", ["b200"])
    facts = torch_fixture("b200x2-torch2.7.1-cu126.json")
    res = decide_devices(lock, facts["devices"], [_nvidia("nvidia-smi-q-x-b200x2.xml")])
    assert res.status == "failed"
    assert "device 0 (NVIDIA B200, sm_100) has no kernels in torch" in (res.error or "")


def test_half_a_b200_lot_is_reported() -> None:
    lock = gpu_lock("cuda", ["b200"])
    facts = torch_fixture("b200x2-torch2.7.1-cu128.json")
    one = {**facts["devices"], "devices": facts["devices"]["devices"][:1]}
    res = decide_devices(lock, one, [], restricted=False)
    assert res.status == "failed"
    assert "1 NVIDIA B200 visible; a lot has 2 cards" in (res.error or "")


def test_too_few_devices_for_the_job() -> None:
    lock = gpu_lock("cuda", ["h100"], gpus=2)
    res = decide_devices(lock, torch_fixture("h100-torch2.7.1-cu128.json")["devices"], [])
    assert "1 device(s) visible; the job needs 2" in (res.error or "")


def test_smi_disagreement_is_a_failure() -> None:
    lock = gpu_lock("cuda", ["b200"], gpus=2)
    facts = torch_fixture("b200x2-torch2.7.1-cu128.json")
    res = decide_devices(lock, facts["devices"], [_nvidia("nvidia-smi-q-x-h100.xml")])
    assert res.status == "failed"
    assert "nvidia-smi lists 1 GPU(s), torch sees 2" in (res.error or "")


def test_smi_restricted_by_cuda_visible_devices_is_not_a_disagreement() -> None:
    lock = gpu_lock("cuda", ["b200"], gpus=1)
    facts = torch_fixture("b200x2-torch2.7.1-cu128.json")
    two = {**facts["devices"], "devices": facts["devices"]["devices"] * 1}
    res = decide_devices(lock, two, [_nvidia("nvidia-smi-q-x-b200x2.xml")], restricted=True)
    assert res.status == "passed", res.error


def test_driver_below_the_toolkit_minimum() -> None:
    lock = gpu_lock("cuda", ["h100"])
    xml = smi_text("nvidia-smi-q-x-h100.xml").replace("570.124.06", "550.54.15")
    view = parse_nvidia_xml(xml, "nvidia-smi -q -x")
    res = decide_accelerator(
        lock, torch_fixture("h100-torch2.7.1-cu128.json")["accelerator"], view.driver_version, "nvidia-smi"
    )
    assert res.status == "failed"
    assert res.error == "driver 550.54.15 is older than 570.124.06, the minimum for CUDA 12.8"


def test_unknown_driver_on_a_cuda_lock_fails() -> None:
    lock = gpu_lock("cuda", ["h100"])
    res = decide_accelerator(lock, torch_fixture("h100-torch2.7.1-cu128.json")["accelerator"], None, None)
    assert res.status == "failed"
    assert "driver version unknown" in (res.error or "")


def test_no_gpu_visible_cuda_hint_names_the_cause() -> None:
    lock = gpu_lock("cuda", ["h100"])
    res = decide_accelerator(
        lock, torch_fixture("no-gpu-container-torch2.7.1-cu128.json")["accelerator"], None, None
    )
    assert res.status == "failed"
    assert res.error == "cuda lock but no GPU is visible to torch"
    hint = res.hint or ""
    assert "docker run --gpus all" in hint
    assert "NVIDIA_VISIBLE_DEVICES is unset" in hint
    assert "Found no NVIDIA driver" in hint


def test_no_gpu_visible_hidden_by_cuda_visible_devices() -> None:
    lock = gpu_lock("cuda", ["h100"])
    facts = torch_fixture("h100-torch2.7.1-cu128.json")["accelerator"]
    hidden = {
        **facts,
        "device_count": 0,
        "available": False,
        "env": {**facts["env"], "CUDA_VISIBLE_DEVICES": ""},
    }
    res = decide_accelerator(lock, hidden, "570.124.06", "NVML")
    assert "CUDA_VISIBLE_DEVICES='' hides every GPU" in (res.hint or "")
    assert "--gpus all" not in (res.hint or "")  # the device nodes are there


def test_no_gpu_visible_rocm_hint_names_kfd() -> None:
    lock = gpu_lock("rocm", ["mi300x"])
    res = decide_accelerator(
        lock, torch_fixture("no-gpu-container-torch2.7.1-rocm6.3.json")["accelerator"], None, None
    )
    assert res.status == "failed"
    assert "--device=/dev/kfd --device=/dev/dri" in (res.hint or "")


def test_wrong_variant_on_gpu_lock() -> None:
    lock = gpu_lock("cuda", ["h100"])
    facts = torch_fixture("h100-torch2.7.1-cu128.json")["accelerator"]
    res = decide_accelerator(lock, {**facts, "cuda": "12.6"}, "570.124.06", "NVML")
    assert res.error == "torch is built for CUDA 12.6; the lock declares CUDA 12.8"
    cpu_build = {**facts, "cuda": None, "device_count": 0}
    assert (
        decide_accelerator(lock, cpu_build, None, None).error
        == "torch is a cpu build; the lock declares CUDA 12.8"
    )


def test_mi300x_passes_with_amd_tools() -> None:
    lock = gpu_lock("rocm", ["mi300x"])
    facts = torch_fixture("mi300x-torch2.7.1-rocm6.3.json")
    amd = parse_amd_smi(smi_text("amd-smi-static-mi300x.json"), "amd-smi static --json")
    acc = decide_accelerator(lock, facts["accelerator"], amd.driver_version, "amd-smi")
    assert acc.status == "passed", acc.error
    res = decide_devices(lock, facts["devices"], [amd])
    assert res.status == "passed", res.error
    assert res.facts["devices"][0]["arch"] == "gfx942"
    rocm = parse_rocm_smi(smi_text("rocm-smi-showproductname-mi300x.json"), "rocm-smi --json")
    assert decide_devices(lock, facts["devices"], [rocm]).status == "passed"


def test_mi300x_with_a_wheel_without_gfx942() -> None:
    lock = gpu_lock("rocm", ["mi300x"])
    facts = torch_fixture("mi300x-torch2.7.1-rocm6.3.json")["devices"]
    old = {**facts, "arch_list": ["gfx900", "gfx906", "gfx908", "gfx90a", "gfx1030", "gfx1100"]}
    res = decide_devices(lock, old, [])
    assert res.status == "failed"
    assert "gfx942) has no kernels in torch" in (res.error or "")


def test_cpu_lock_skips_devices_and_accepts_a_visible_gpu() -> None:
    lock = gpu_lock("cpu", [], accelerator_version=None, torch_variant="cpu")
    assert decide_devices(lock, {}, []).status == "skipped"
    facts = torch_fixture("h100-torch2.7.1-cu128.json")["accelerator"]
    res = decide_accelerator(lock, {**facts, "cuda": None}, "570.124.06", "NVML")
    assert res.status == "passed" and res.facts["gpu_seen"] is True
    wrong = decide_accelerator(lock, facts, "570.124.06", "NVML")
    assert wrong.error == "torch is a CUDA 12.8 build; the lock declares the cpu variant"


def test_smi_csv_reading_with_arch_agrees_and_catches_a_mismatch() -> None:
    lock = gpu_lock("cuda", ["h100"], gpus=1)
    facts = torch_fixture("h100-torch2.7.1-cu128.json")["devices"]
    csv_reading = parse_query_gpu(smi_text("nvidia-smi-query-gpu-h100x2.csv"), "nvidia-smi --query-gpu")
    one = replace(csv_reading, devices=csv_reading.devices[:1])
    assert decide_devices(lock, facts, [one]).status == "passed"
    wrong = replace(one, devices=(replace(one.devices[0], arch="sm_80"),))
    res = decide_devices(lock, facts, [wrong])
    assert "device 0: torch arch sm_90, nvidia-smi arch sm_80" in (res.error or "")


def test_the_first_reading_of_the_locks_vendor_is_compared() -> None:
    """An AMD reading on a CUDA machine is not compared; the CSV reading (first) is, before the XML."""
    lock = gpu_lock("cuda", ["h100"], gpus=1)
    facts = torch_fixture("h100-torch2.7.1-cu128.json")["devices"]
    amd = parse_amd_smi(smi_text("amd-smi-static-mi300x.json"), "amd-smi static --json")
    assert decide_devices(lock, facts, [amd]).facts["smi_agreement"] == "not checked: no vendor tool answered"
    csv_reading = parse_query_gpu(smi_text("nvidia-smi-query-gpu-h100x2.csv"), "nvidia-smi --query-gpu")
    res = decide_devices(lock, facts, [amd, csv_reading, _nvidia("nvidia-smi-q-x-h100.xml")])
    assert res.facts["smi_agreement"] == "nvidia-smi lists 2 GPU(s), torch sees 1"


def test_an_mi250x_is_two_devices_of_64_gib(tmp_path: Path) -> None:
    """Hand-written device facts shaped like torch's for an MI250X (two GCDs of 64 GiB each, gfx90a);
    no MI250X output was recorded.  The lock's target comes from the real catalog row via render."""
    from envbuild.plan import check
    from envbuild.profile import load_profile
    from envbuild.render import make_lock

    profile = tmp_path / "rocm.toml"
    profile.write_text(
        'name = "rocm"\nkind = "pytorch"\nextends = "pytorch"\n'
        '[accelerator]\nbackend = "rocm"\nversion = "6.3"\ntargets = ["mi250x"]\n'
    )
    plan = check(load_profile(str(profile))).plan
    lock = make_lock(plan)
    (target,) = lock.targets
    assert (target.devices_per_card, target.memory_per_device, target.devices_per_lot) == (2, 64, 2)
    gcd = {
        "name": "AMD Instinct MI250X",
        "gcnArchName": "gfx90a:sramecc+:xnack-",
        "total_memory": 64 * 1024**3,
    }
    both = {"devices": [{**gcd, "index": 0}, {**gcd, "index": 1}], "arch_list": list(lock.torch_arch_list)}
    res = decide_devices(lock, both, [])
    assert "not a declared card" not in (res.error or ""), res.error
    assert "a lot has" not in (res.error or "")
    one = decide_devices(lock, {**both, "devices": both["devices"][:1]}, [])
    assert "1 AMD Instinct MI250X visible; a lot has 2 devices (2 per card)" in (one.error or "")


# Recorded on a lent H200 by scripts/gpu-check.sh (2026-12-04): torch 2.11.0+cu130 from the package index,
# driver 580.159.04 (tests/fixtures/torch/README.md, tests/fixtures/smi/SOURCES.md).
H200_TORCH = "h200-torch2.11.0-cu130.recorded.json"
H200_XML = "real/nvidia-smi-q-x/h200-580.159.04.xml"


def _h200_lock() -> Lock:
    """The lock rendered from the profile the lent H200 was validated against (tests/gpu/)."""
    from envbuild.plan import check
    from envbuild.profile import load_profile
    from envbuild.render import make_lock

    profile = Path(__file__).resolve().parent / "gpu" / "h200-torch211.toml"
    return make_lock(check(load_profile(str(profile))).plan)


def test_a_recorded_h200_passes_accelerator_and_devices() -> None:
    lock = _h200_lock()
    assert (lock.torch_version, lock.torch_variant, lock.accelerator_version) == ("2.11.0", "cu130", "13.0")
    facts = torch_fixture(H200_TORCH)
    view = _nvidia(H200_XML)
    acc = decide_accelerator(lock, facts["accelerator"], view.driver_version, "nvidia-smi")
    assert acc.status == "passed", acc.error
    dev = decide_devices(lock, facts["devices"], [view])
    assert dev.status == "passed", dev.error
    (row,) = dev.facts["devices"]
    assert (row["arch"], row["covered_by"], row["target"], row["memory_gib"]) == (
        "sm_90",
        "cubin sm_90",
        "h200",
        139.8,
    )
    assert dev.facts["smi_agreement"] == "agrees with nvidia-smi"
    query = parse_query_gpu(smi_text("real/nvidia-smi-query/h200.csv"), "nvidia-smi --query-gpu")
    assert query.devices[0].arch == "sm_90"
    assert decide_devices(lock, facts["devices"], [query]).status == "passed"


def test_a_cuda_devices_gcn_arch_name_is_not_its_arch() -> None:
    """torch 2.11's CUDA device properties carry gcnArchName too, holding the device's name: read as
    the arch, every NVIDIA device had "no kernels in torch" and was "not a declared card" (the devices
    stage failed so on the lent H200 before the fix)."""
    facts = torch_fixture(H200_TORCH)
    (props,) = facts["device_properties"]
    assert props["gcnArchName"] == props["name"] == "NVIDIA H200"
    (device,) = facts["devices"]["devices"]
    as_before = {**facts["devices"], "devices": [{**device, "gcnArchName": props["gcnArchName"]}]}
    res = decide_devices(_h200_lock(), as_before, [_nvidia(H200_XML)])
    assert res.status == "passed", res.error
    assert res.facts["devices"][0]["arch"] == "sm_90"
