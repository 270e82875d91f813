"""Card rules: memory per device against usable memory, lots within the provider's limits, idle cards,
multi-device cards (MI250X), and ROCm targets getting ROCm advice only."""

from __future__ import annotations

from plan_support import profile

from envbuild.models import CheckResult, Finding
from envbuild.plan import check
from envbuild.render.readme import render_readme


def _one(result: CheckResult, code: str) -> Finding:
    found = [f for f in result.findings if f.code == code]
    assert len(found) == 1, "\n".join(f"{f.code}: {f.message}" for f in result.findings)
    return found[0]


def test_mi250x_is_planned_per_device() -> None:
    result = check(profile(backend="rocm", targets=("mi250x",), memory=70.0, gpus=3))
    devices = _one(result, "I-CARD-DEVICES")
    assert "an MI250X is two devices of 64 GiB each" in devices.message
    assert "gpus = 3 is 2 mi250x card(s) in 2 lot(s)" in devices.message
    memory = _one(result, "E-MEMORY-PER-CARD")  # 70 GiB fits the 128 GiB card, not one 64 GiB device
    assert "needs 70 GiB per device" in memory.message
    assert "AMD Instinct MI250X 64 GiB per device: at most ~63 GiB usable" in memory.message
    assert "an MI250X is two devices of 64 GiB each" in memory.message
    idle = _one(result, "I-LOT-IDLE")
    assert "orders 2 lots = 4 devices, so 1 device stays idle in the last lot" in idle.message
    (target,) = result.plan.targets
    assert (target.devices_per_card, target.memory_per_device, target.memory_gib) == (2, 64, 128)


def test_need_equal_to_usable_memory_is_an_error() -> None:
    result = check(profile(memory=79.0))
    finding = _one(result, "E-MEMORY-PER-CARD")
    assert not result.ok
    assert (
        "resources.gpu_memory_gib = 79: the job needs 79 GiB per device; NVIDIA H100 SXM 80GB 80 GiB: "
        "at most ~79 GiB usable (reserve 1 GiB for the CUDA context)"
    ) in finding.message
    # the reserve's citation is the finding's source, beside the card's row, never in the message
    assert finding.source and "pytorch/pytorch#107667" in finding.source and "h100: " in finding.source
    assert "#107667" not in finding.message
    assert "pool" not in finding.message  # 79 GiB fits the card's 80: the reserve, not pooling, is why


def test_need_within_ten_percent_of_usable_is_a_warning_with_headroom() -> None:
    result = check(profile(memory=75.0))
    assert result.ok
    finding = _one(result, "W-MEMORY-TIGHT")
    assert finding.message.startswith(
        "resources.gpu_memory_gib = 75: 75 GiB per device leaves 4 GiB headroom (5.1%, under 10%) on "
    )
    assert "at most ~79 GiB usable" in finding.message
    assert "W-MEMORY-TIGHT" not in {f.code for f in check(profile(memory=71.0)).findings}


def test_more_than_ten_lots_is_an_error_naming_the_most_gpus() -> None:
    result = check(profile(targets=("b200",), version="12.8", gpus=22))
    assert not result.ok
    finding = _one(result, "E-LOTS-MAX")
    assert "resources.gpus = 22 needs 11 lots of b200 (2 card(s) per lot)" in finding.message
    assert "IteraGPU rents 1 to 10 lots per order: at most" in finding.message
    assert (
        finding.source and "seeds/000_4434f24d215a3419.txt" in finding.source and "§" not in finding.message
    )
    assert "at most 20 gpus fit on b200. Use gpus <= 20" in finding.message
    h100 = _one(check(profile(gpus=11)), "E-LOTS-MAX")
    assert "Use gpus <= 10, or a card with more cards per lot: b200" in h100.message
    twenty = check(profile(targets=("b200",), version="12.8", gpus=20))
    assert "E-LOTS-MAX" not in {f.code for f in twenty.findings}


def test_odd_gpus_on_b200_names_the_idle_card() -> None:
    finding = _one(check(profile(targets=("b200",), version="12.8", gpus=3)), "I-LOT-IDLE")
    assert finding.message == (
        "each b200 lot has 2 cards; resources.gpus = 3 orders 2 lots = 4 cards, so 1 card stays idle in the "
        "last lot (paid for: use gpus = 4, or accept the idle card)"
    )
    four = check(profile(targets=("b200",), version="12.8", gpus=4))
    assert "I-LOT-IDLE" not in {f.code for f in four.findings}


def test_rocm_target_gets_rocm_advice_only() -> None:
    rocm = check(profile(backend="rocm", targets=("mi300x",)), driver="570.124.06")
    texts = [f.message for f in rocm.findings]
    assert rocm.plan.min_driver is None
    assert "I-DRIVER-UNKNOWN" not in {f.code for f in rocm.findings}
    host = _one(rocm, "I-ROCM-HOST")
    assert "amdgpu kernel driver supports ROCm 6.3" in host.message
    assert "AMD Instinct MI300X needs ROCm >= 6.0" in host.message
    assert not any("NVIDIA driver" in t for t in texts), texts
    readme = render_readme(rocm, "envbuild render t --target mi300x")
    assert "NVIDIA" not in readme.split("## Findings")[0]
    assert "- Host driver: an amdgpu kernel driver that supports ROCm 6.3" in readme
    # the wrong backend on an AMD card: the mismatch is the error, and no NVIDIA driver is advised
    cuda = check(profile(targets=("mi300x",)))
    assert {f.code for f in cuda.findings} >= {"E-VENDOR-MISMATCH"}
    assert "I-DRIVER-UNKNOWN" not in {f.code for f in cuda.findings}
    assert cuda.plan.min_driver is None
