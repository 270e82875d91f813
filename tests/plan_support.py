"""Build Profile objects directly for planner tests (no loader involved)."""

from __future__ import annotations

from typing import Any

from envbuild.models import (
    AcceleratorSpec,
    BaseSpec,
    BlenderSpec,
    Profile,
    PythonSpec,
    RequirementLine,
    ResourcesSpec,
    TorchSpec,
    ValidateSpec,
)


def req(text: str, name: str | None, origin: str = "requirements.txt:1") -> RequirementLine:
    return RequirementLine(kind="requirement", text=text, name=name, origin=origin)


def profile(
    *,
    backend: str = "cuda",
    targets: tuple[str, ...] = ("h100",),
    version: str | None = None,
    os: str = "ubuntu24.04",
    python: str = "3.12",
    torch: str | None = "2.7.1",
    companions: tuple[str, ...] = (),
    lines: tuple[RequirementLine, ...] = (),
    memory: float | None = None,
    gpus: int = 1,
    blender: str | None = None,
    devices: tuple[str, ...] = (),
    compile_extensions: bool = False,
    probe_ops: bool = True,
    torch_compile: bool = False,
    image: str | None = None,
    kind: str = "pytorch",
) -> Profile:
    data: dict[str, Any] = {
        "name": "t",
        "kind": kind,
        "path": "test.toml",
        "sha256": "0" * 64,
        "base": BaseSpec(os=os, image=image),  # type: ignore[arg-type]
        "accelerator": AcceleratorSpec(backend=backend, version=version, targets=targets),  # type: ignore[arg-type]
        "python": PythonSpec(version=python, lines=lines),
        "torch": TorchSpec(version=torch, packages=companions),
        "resources": ResourcesSpec(gpu_memory_gib=memory, gpus=gpus),
        "blender": BlenderSpec(version=blender, devices=devices),  # type: ignore[arg-type]
        "validate_": ValidateSpec(
            compile_extensions=compile_extensions, probe_ops=probe_ops, torch_compile=torch_compile
        ),
    }
    return Profile(**data)
