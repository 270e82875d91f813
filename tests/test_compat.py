"""Table-driven compatibility verdicts, each row taken from ../shared/design/compat-facts.md."""

from __future__ import annotations

from typing import Any

import pytest
from plan_support import profile, req

from envbuild.plan import check

WHEEL_310 = "flash-attn @ https://example.org/flash_attn-2.6.3%2Bcu123torch2.4-cp310-cp310-linux_x86_64.whl"
WHEEL_ANY = "tiny @ https://example.org/tiny-1.0-py3-none-any.whl"
WHEEL_PLAT = "fast @ https://example.org/fast-1.0-cp312-cp312-manylinux_2_40_x86_64.whl"

# id, profile kwargs, driver, codes that must appear, codes that must not, expected ok
CASES: list[tuple[str, dict[str, Any], str | None, set[str], set[str], bool]] = [
    # vendor / backend (§4 cards)
    ("cuda-on-mi300x", {"targets": ("mi300x",)}, None, {"E-VENDOR-MISMATCH"}, set(), False),
    ("rocm-on-h100", {"backend": "rocm", "targets": ("h100",)}, None, {"E-VENDOR-MISMATCH"}, set(), False),
    ("cpu-on-h100", {"backend": "cpu", "targets": ("h100",)}, None, {"W-GPU-UNUSED"}, set(), True),
    ("cuda-on-cpu", {"targets": ("cpu",)}, None, {"E-VENDOR-MISMATCH"}, set(), False),
    ("gb200-aarch64", {"targets": ("gb200",), "torch": "2.9.1"}, None, {"E-HOST-ARCH"}, set(), False),
    # wheel variants (§1 table)
    ("2.7.1-cu130", {"version": "13.0"}, None, {"E-VARIANT-UNAVAILABLE"}, set(), False),
    ("2.12.0-cu128", {"torch": "2.12.0", "version": "12.8"}, None, {"E-VARIANT-UNAVAILABLE"}, set(), False),
    ("2.12.0-cu129", {"torch": "2.12.0", "version": "12.9"}, None, {"E-VARIANT-UNAVAILABLE"}, set(), False),
    ("2.12.1-cu129", {"torch": "2.12.1", "version": "12.9"}, None, set(), {"E-VARIANT-UNAVAILABLE"}, True),
    ("2.8.0-cu118", {"torch": "2.8.0", "version": "11.8"}, None, {"E-VARIANT-UNAVAILABLE"}, set(), False),
    (
        "2.4-rocm6.2",
        {"backend": "rocm", "targets": ("mi300x",), "torch": "2.4.1", "version": "6.2"},
        None,
        {"E-VARIANT-UNAVAILABLE"},
        set(),
        False,
    ),
    # arch coverage (§2a): same-major cubins, +PTX
    (
        "b200-2.6-cu126",
        {"targets": ("b200",), "torch": "2.6.0", "version": "12.6", "os": "ubuntu22.04", "python": "3.11"},
        None,
        {"E-ARCH-MISSING"},
        set(),
        False,
    ),
    ("b200-2.7.1-cu128", {"targets": ("b200",), "version": "12.8"}, None, set(), {"E-ARCH-MISSING"}, True),
    (
        "rtx5090-2.7.1-cu126",
        {"targets": ("rtx5090",), "version": "12.6"},
        None,
        {"E-ARCH-MISSING"},
        set(),
        False,
    ),
    (
        "rtx4090-sm86",
        {"targets": ("rtx4090",), "version": "12.8"},
        None,
        {"I-ARCH-COMPAT"},
        {"E-ARCH-MISSING"},
        True,
    ),
    (
        "l40s-cu118",
        {"targets": ("l40s",), "version": "11.8", "os": "ubuntu22.04"},
        None,
        {"I-ARCH-COMPAT"},
        {"E-ARCH-MISSING"},
        True,
    ),
    (
        "h100-every-variant-2.13",
        {"targets": ("h100",), "torch": "2.13.0", "version": "13.2"},
        None,
        set(),
        {"E-ARCH-MISSING", "W-ARCH-PTX-JIT"},
        True,
    ),
    # ROCm gfx (§2b)
    (
        "mi300x-2.3-rocm5.7",
        {
            "backend": "rocm",
            "targets": ("mi300x",),
            "torch": "2.3.1",
            "version": "5.7",
            "os": "ubuntu22.04",
            "python": "3.10",
        },
        None,
        {"E-ARCH-MISSING", "E-ROCM-TOO-OLD"},
        set(),
        False,
    ),
    (
        "mi300x-2.2",
        {"backend": "rocm", "targets": ("mi300x",), "torch": "2.2.2", "os": "ubuntu22.04", "python": "3.10"},
        None,
        {"E-ARCH-MISSING"},
        set(),
        False,
    ),
    (
        "mi300x-2.3-rocm6.0",
        {
            "backend": "rocm",
            "targets": ("mi300x",),
            "torch": "2.3.1",
            "version": "6.0",
            "os": "ubuntu22.04",
            "python": "3.10",
        },
        None,
        set(),
        {"E-ARCH-MISSING"},
        True,
    ),
    (
        "mi325x-rocm6.2.4",
        {"backend": "rocm", "targets": ("mi325x",), "version": "6.2.4"},
        None,
        {"W-ROCM-TOO-OLD"},
        {"E-ROCM-TOO-OLD"},
        True,
    ),
    # Python wheels (§1)
    (
        "py3.13-torch2.4",
        {"torch": "2.4.1", "python": "3.13", "version": "12.4", "os": "ubuntu22.04"},
        None,
        {"E-PYTHON-NO-WHEEL"},
        set(),
        False,
    ),
    ("py3.9-torch2.9", {"torch": "2.9.1", "python": "3.9"}, None, {"E-PYTHON-NO-WHEEL"}, set(), False),
    (
        "py3.13-torch2.5-exp",
        {"torch": "2.5.1", "python": "3.13", "os": "ubuntu22.04"},
        None,
        {"W-PYTHON-EXPERIMENTAL"},
        set(),
        True,
    ),
    (
        "py3.14-no-os",
        {"torch": "2.9.1", "python": "3.14"},
        None,
        {"E-PYTHON-OS"},
        {"E-PYTHON-NO-WHEEL"},
        False,
    ),
    # drivers (§3): minor-version compatibility, per-toolkit minimum, Blackwell R570+
    (
        "535-cu128-h100",
        {"version": "12.8"},
        "535.104.05",
        {"W-DRIVER-MINOR-COMPAT"},
        {"E-DRIVER-TOO-OLD"},
        True,
    ),
    (
        "535-cu130-h100",
        {"torch": "2.9.1", "version": "13.0"},
        "535.104.05",
        {"E-DRIVER-TOO-OLD"},
        set(),
        False,
    ),
    ("580-cu130-h100", {"torch": "2.9.1", "version": "13.0"}, "580.95.05", set(), {"E-DRIVER-TOO-OLD"}, True),
    ("560-b200", {"targets": ("b200",), "version": "12.8"}, "560.35.05", {"E-DRIVER-CARD"}, set(), False),
    ("570-b200", {"targets": ("b200",), "version": "12.8"}, "570.124.06", set(), {"E-DRIVER-CARD"}, True),
    (
        "520-cu118-floor",
        {"version": "11.8", "os": "ubuntu22.04"},
        "450.80.02",
        {"W-DRIVER-MINOR-COMPAT"},
        set(),
        True,
    ),
    ("449-cu118", {"version": "11.8", "os": "ubuntu22.04"}, "449.10.01", {"E-DRIVER-TOO-OLD"}, set(), False),
    ("no-driver", {}, None, {"I-DRIVER-UNKNOWN"}, set(), True),
    # memory (§4; CONTEXT: cards do not pool memory)
    ("mem-100-h100", {"memory": 100.0, "gpus": 2}, None, {"E-MEMORY-PER-CARD"}, set(), False),
    ("mem-tight", {"memory": 78.0}, None, {"W-MEMORY-TIGHT"}, set(), True),
    (
        "mem-b200-lot",
        {"targets": ("b200",), "version": "12.8", "memory": 200.0},
        None,
        {"E-MEMORY-PER-CARD"},
        set(),
        False,
    ),
    ("gpus-4-h100", {"gpus": 4}, None, {"W-MULTI-LOT"}, set(), True),
    ("b200-lot-idle", {"targets": ("b200",), "version": "12.8"}, None, {"I-LOT-IDLE"}, set(), True),
    # companions (pairing from each release's Requires-Dist; torchaudio past 2.11 by declaration, issue 13)
    ("tv-mismatch", {"companions": ("torchvision==0.21.0",)}, None, {"E-COMPANION-MISMATCH"}, set(), False),
    ("tv-bare", {"companions": ("torchvision",)}, None, set(), {"E-COMPANION-MISMATCH"}, True),
    (
        "ta-2.12",
        {"torch": "2.12.1", "companions": ("torchaudio",)},
        None,
        {"I-COMPANION-DECLARED"},
        {"E-COMPANION-UNAVAILABLE"},
        True,
    ),
    ("unknown-companion", {"companions": ("numpy",)}, None, {"E-COMPANION-UNKNOWN"}, set(), False),
    (
        "triton-on-rocm",
        {"backend": "rocm", "targets": ("mi300x",), "companions": ("triton",)},
        None,
        {"E-COMPANION-MISMATCH"},
        set(),
        False,
    ),
    (
        "user-torch-conflict",
        {"lines": (req("torch==2.6.0", "torch"),)},
        None,
        {"E-REQ-CONFLICT"},
        set(),
        False,
    ),
    (
        "user-tv-ok",
        {"lines": (req("torchvision>=0.20", "torchvision"),)},
        None,
        {"I-REQ-SUPERSEDED"},
        set(),
        True,
    ),
    (
        "user-torch-undeclared",
        {"torch": None, "lines": (req("torch>=2.7", "torch"),)},
        None,
        {"W-TORCH-UNDECLARED", "W-DRIVER-PROVISIONAL"},
        set(),
        True,
    ),
    # issue 37: an exact pin is read into the plan before resolution, as torch.version is
    (
        "user-torch-exact-pin",
        {"torch": None, "lines": (req("torch==2.7.1", "torch"),)},
        None,
        {"I-REQ-SUPERSEDED"},
        {"W-TORCH-UNDECLARED", "W-DRIVER-PROVISIONAL"},
        True,
    ),
    # direct wheel URLs vs the image's Python/platform
    ("wheel-cp310-on-3.12", {"lines": (req(WHEEL_310, "flash-attn"),)}, None, {"E-WHEEL-TAGS"}, set(), False),
    ("wheel-any", {"lines": (req(WHEEL_ANY, "tiny"),)}, None, set(), {"E-WHEEL-TAGS"}, True),
    ("wheel-glibc-2.40-on-2.39", {"lines": (req(WHEEL_PLAT, "fast"),)}, None, {"E-WHEEL-TAGS"}, set(), False),
    # base images (§5)
    # no nvidia/cuda image for the OS: the plain OS image, NVIDIA_REQUIRE_CUDA set by the Dockerfile
    (
        "cuda-debian12",
        {"os": "debian12", "python": "3.11"},
        None,
        {"I-BASE-DERIVED"},
        {"E-BASE-UNAVAILABLE"},
        True,
    ),
    ("cu118-ubuntu24.04", {"version": "11.8"}, None, {"I-BASE-DERIVED"}, {"E-BASE-UNAVAILABLE"}, True),
    # ... but nvcc comes only with NVIDIA's devel image
    (
        "cuda-debian12-compiles",
        {"os": "debian12", "python": "3.11", "compile_extensions": True},
        None,
        {"E-BASE-UNAVAILABLE"},
        set(),
        False,
    ),
    (
        "rocm-debian12",
        {"backend": "rocm", "targets": ("mi300x",), "os": "debian12", "python": "3.11"},
        None,
        {"E-BASE-UNAVAILABLE"},
        set(),
        False,
    ),
    (
        "explicit-image",
        {"os": "debian12", "python": "3.11", "image": "example.org/cuda:1"},
        None,
        {"I-BASE-EXPLICIT"},
        {"E-BASE-UNAVAILABLE"},
        True,
    ),
    # Blender (§6)
    (
        "blender-hip-mi300x",
        {
            "backend": "rocm",
            "targets": ("mi300x",),
            "torch": None,
            "blender": "4.5.3",
            "devices": ("HIP",),
            "kind": "blender",
        },
        None,
        {"E-BLENDER-HIP-UNSUPPORTED"},
        set(),
        False,
    ),
    (
        "blender-hip-mi250x-3.6",
        {
            "backend": "rocm",
            "targets": ("mi250x",),
            "torch": None,
            "blender": "3.6.5",
            "devices": ("HIP",),
            "kind": "blender",
            "os": "ubuntu22.04",
            "python": "3.10",
        },
        None,
        {"E-BLENDER-HIP-UNSUPPORTED"},
        set(),
        False,
    ),
    (
        "blender-cuda-h100",
        {"torch": None, "blender": "4.5.3", "devices": ("CUDA",), "kind": "blender"},
        None,
        {"W-BLENDER-PTX-JIT"},
        set(),
        True,
    ),
    (
        "blender-cuda-b200",
        {"targets": ("b200",), "torch": None, "blender": "5.0.1", "devices": ("CUDA",), "kind": "blender"},
        None,
        {"W-BLENDER-PTX-JIT"},
        set(),
        True,
    ),
    (
        "blender-optix-h100",
        {"torch": None, "blender": "4.5.3", "devices": ("OPTIX",), "kind": "blender"},
        None,
        set(),
        {"W-BLENDER-PTX-JIT", "E-BLENDER-DEVICE"},
        True,
    ),
    (
        "blender-optix-5.0-old-driver",
        {
            "torch": None,
            "blender": "5.0.1",
            "devices": ("OPTIX",),
            "kind": "blender",
            "version": "12.1",
            "os": "ubuntu22.04",
            "python": "3.10",
        },
        "530.30.02",
        {"E-BLENDER-OPTIX-DRIVER"},
        set(),
        False,
    ),
    (
        "blender-cuda-5090-4.2",
        {"targets": ("rtx5090",), "torch": None, "blender": "4.2.3", "devices": ("CUDA",), "kind": "blender"},
        None,
        {"W-BLENDER-PTX-JIT"},
        set(),
        True,
    ),
    (
        "blender-cuda-5090-4.5",
        {"targets": ("rtx5090",), "torch": None, "blender": "4.5.3", "devices": ("CUDA",), "kind": "blender"},
        None,
        set(),
        {"W-BLENDER-PTX-JIT"},
        True,
    ),
    (
        "blender-cuda-on-amd",
        {
            "backend": "rocm",
            "targets": ("mi300x",),
            "torch": None,
            "blender": "4.5.3",
            "devices": ("CUDA",),
            "kind": "blender",
        },
        None,
        {"E-BLENDER-DEVICE"},
        set(),
        False,
    ),
    (
        "blender-unknown",
        {"torch": None, "blender": "2.79.0", "kind": "blender"},
        None,
        {"E-BLENDER-UNKNOWN"},
        set(),
        False,
    ),
]


@pytest.mark.parametrize(
    ("kwargs", "driver", "present", "absent", "ok"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_verdict(
    kwargs: dict[str, Any], driver: str | None, present: set[str], absent: set[str], ok: bool
) -> None:
    result = check(profile(**kwargs), driver=driver)
    codes = {f.code for f in result.findings}
    summary = "\n".join(f"{f.severity} {f.code}: {f.message}" for f in result.findings)
    assert present <= codes, summary
    assert not (absent & codes), summary
    assert result.ok is ok, summary


def test_memory_pool_phrase() -> None:
    pooled = check(profile(memory=100.0, gpus=2))
    single = check(profile(memory=200.0, gpus=1))
    (p,) = [f for f in pooled.findings if f.code == "E-MEMORY-PER-CARD"]
    (s,) = [f for f in single.findings if f.code == "E-MEMORY-PER-CARD"]
    assert "do not pool memory" in p.message and "2 x 80 GiB = 160 GiB" in p.message
    assert "pool" not in s.message
    lot = check(profile(targets=("b200",), version="12.8", memory=200.0))
    (b,) = [f for f in lot.findings if f.code == "E-MEMORY-PER-CARD"]
    assert "2 x 180 GiB = 360 GiB" in b.message


def test_arch_missing_names_what_works() -> None:
    result = check(profile(targets=("b200",), torch="2.6.0", version="12.6", os="ubuntu22.04", python="3.11"))
    (f,) = [f for f in result.findings if f.code == "E-ARCH-MISSING"]
    assert "sm_100" in f.message and "no kernel image is available" in f.message
    assert "torch 2.7.0 (cu128) is the first release with sm_100" in f.message


def test_variant_message_lists_choices() -> None:
    result = check(profile(version="13.0"))
    (f,) = [f for f in result.findings if f.code == "E-VARIANT-UNAVAILABLE"]
    assert "cu118" in f.message and "cu126" in f.message and "cu128" in f.message
    assert "11.8, 12.6, 12.8" in f.message


def test_driver_unknown_names_minimum() -> None:
    result = check(profile(version="12.8"))
    (f,) = [f for f in result.findings if f.code == "I-DRIVER-UNKNOWN"]
    assert "570.124.06" in f.message and "525.60.13" in f.message
