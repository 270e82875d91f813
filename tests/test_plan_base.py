"""The base image: no heavier than the workload, and never one a later finding refuses (issue 22, item 8)."""

from __future__ import annotations

from plan_support import profile

from envbuild.cli._check import _base_row
from envbuild.models import CheckResult
from envbuild.plan import check


def _message(result: CheckResult, code: str) -> str:
    (message,) = [f.message for f in result.findings if f.code == code]
    return message


def test_blender_on_debian12_is_planned_on_the_plain_os_image() -> None:
    """The issue's refusal that contradicted itself: the fallback took the newest toolkit, called it the
    oldest image for debian12, then refused it because no debian12 image exists."""
    result = check(
        profile(
            torch=None,
            kind="blender",
            blender="4.5.3",
            devices=("OPTIX", "CUDA"),
            targets=("rtx4090",),
            os="debian12",
            python="3.11",
        )
    )
    assert result.ok, result.findings
    assert (result.plan.base_image, result.plan.base_flavor) == ("debian:12", "os")
    derived = _message(result, "I-VARIANT-DERIVED")
    assert "CUDA 11.8.0, the oldest toolkit that supports the targets" in derived
    assert "no image of it for debian12" in derived
    base = _message(result, "I-BASE-DERIVED")
    assert "Blender carries its own CUDA and OptiX kernels" in base
    assert "NVIDIA_DRIVER_CAPABILITIES=compute,utility,graphics" in base
    assert "NVIDIA_REQUIRE_CUDA=cuda>=11.8" in _base_row(result.plan)  # check's "base image" row


def test_rocm_keeps_the_dev_image_for_the_validators_tools() -> None:
    result = check(
        profile(backend="rocm", targets=("mi300x",), torch="2.7.1", os="ubuntu22.04", python="3.11")
    )
    assert result.ok, result.findings
    assert result.plan.base_flavor == "rocm-dev" and not result.plan.base_image.endswith("-complete")
    base = _message(result, "I-BASE-DERIVED")
    assert "amd-smi and rocm-smi" in base and "torch's ROCm wheels bundle ROCm's libraries" in base
