"""The five built-in profiles, ``describe_builtins`` and ``envbuild profiles``."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import envbuild, invoke
from packaging.utils import parse_wheel_filename

from envbuild.cli import _profiles, cli  # _profiles registers the command
from envbuild.profile import builtin_names, describe_builtins, load_profile
from envbuild.resources import profiles_dir

BUILTINS = ["blender", "blender-cpu", "custom", "pytorch", "pytorch-cpu", "ubuntu"]


def test_builtin_names() -> None:
    assert builtin_names() == BUILTINS


@pytest.mark.parametrize("name", BUILTINS)
def test_each_builtin_loads_with_provenance(name: str) -> None:
    p = load_profile(name)
    assert p.name == name
    assert p.path == f"builtin:{name}" and p.folder is None
    assert len(p.sha256) == 64 and p.description
    assert p.sources["name"] == f"profile:builtin:{name}"
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.name = "other"  # type: ignore[misc]


def test_kinds_and_describe() -> None:
    kinds = {name: kind for name, kind, _ in describe_builtins()}
    assert kinds == {
        "blender": "blender",
        "blender-cpu": "blender",
        "custom": "custom",
        "pytorch": "pytorch",
        "pytorch-cpu": "pytorch",
        "ubuntu": "ubuntu",
    }


def test_ubuntu() -> None:
    p = load_profile("ubuntu")
    assert (p.base.os, p.accelerator.backend, p.torch.version) == ("ubuntu24.04", "cpu", None)
    assert "git" in p.system.apt


def test_pytorch() -> None:
    p = load_profile("pytorch")
    assert (p.base.os, p.accelerator.backend, p.python.version) == ("ubuntu24.04", "cuda", "3.12")
    assert (p.torch.version, p.torch.packages, p.accelerator.targets) == (
        "2.14.1",
        ("torchvision",),
        ("h100",),
    )
    assert p.resources.gpu_memory_gib is not None and p.resources.gpu_memory_gib > 0


def test_blender() -> None:
    p = load_profile("blender")
    assert (p.blender.version, p.blender.devices, p.torch.version) == ("4.5.3", ("OPTIX", "CUDA"), None)
    assert p.accelerator.backend == "cuda"


def test_custom_extends_pytorch_and_adds_everything() -> None:
    p, parent = load_profile("custom"), load_profile("pytorch")
    assert p.extends == "pytorch" and p.kind == "custom"
    # its own torch (the flash-attn wheel is built for torch 2.7 / CUDA 12), the parent's companions
    assert (p.torch.version, p.accelerator.version) == ("2.7.1", "12.8")
    assert p.torch.packages == parent.torch.packages and p.base == parent.base
    assert p.python.packages[: len(parent.python.packages)] == parent.python.packages
    url_lines = [line for line in p.python.lines if " @ https://" in line.text]
    assert url_lines, "custom must show a direct wheel URL"
    filename = url_lines[0].text.rsplit("/", 1)[1]
    _, _, _, tags = parse_wheel_filename(filename)
    assert any(t.interpreter == "cp" + p.python.version.replace(".", "") for t in tags)
    assert any(line.origin.startswith("builtin:custom/requirements.txt:") for line in p.python.lines)
    assert set(parent.system.apt) < set(p.system.apt)
    assert set(parent.env) < set(p.env)
    assert [c.name for c in p.checks] == ["pilot"] and p.checks[0].expect_files
    assert p.app.source is not None and (profiles_dir() / p.app.source / "src" / "pilot.py").is_file()
    assert (profiles_dir() / p.app.source / "config" / "pilot.json").is_file()
    assert p.sources["torch.packages"] == "extends:builtin:pytorch"
    assert p.sources["torch.version"] == "profile:builtin:custom"


def test_pytorch_cpu_is_buildable_offline() -> None:
    p = load_profile("pytorch-cpu")
    assert (p.base.os, p.python.version, p.accelerator.backend) == ("debian12", "3.11", "cpu")
    assert (p.torch.version, p.torch.packages) == ("2.13.0", ())
    assert (p.resources.gpus, p.resources.gpu_memory_gib) == (1, None)
    # the validator's op is built with the image; the final image carries no compiler
    assert (p.validate_.probe_ops, p.validate_.compile_extensions) == (True, False)
    # every requirement is an exact pin (a wheelhouse can be filled for it) and not a URL
    for line in p.python.lines:
        assert line.kind == "requirement" and "==" in line.text and "@" not in line.text


@pytest.mark.parametrize("name", ["custom", "pytorch-cpu"])
@pytest.mark.slow
def test_pilot_app_satisfies_its_own_check(name: str, tmp_path: Path) -> None:
    """Run the shipped pilot exactly as the validator would (argv, cwd = app copy) and check expectations."""
    import shutil

    p = load_profile(name)
    assert p.app.source is not None
    work = tmp_path / "workspace"
    shutil.copytree(profiles_dir() / p.app.source, work)
    check = p.checks[0]
    argv = [sys.executable if check.run[0] == "python" else check.run[0], *check.run[1:]]
    done = subprocess.run(argv, cwd=work, capture_output=True, text=True, timeout=check.timeout_s)
    assert done.returncode == check.expect_exit, done.stderr
    for rel in check.expect_files:
        assert (work / rel).stat().st_size > 0
    for spec, expected in check.expect_json.items():
        file, _, dotted = spec.rpartition(":")
        value = json.loads((work / file).read_text())
        for part in dotted.split("."):
            value = value[part]
        assert value == expected


def test_profiles_cli_json() -> None:
    result = invoke(["profiles", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [r["name"] for r in rows] == BUILTINS
    assert all(set(r) == {"name", "kind", "description"} and r["description"] for r in rows)


def test_profiles_cli_real_process() -> None:
    assert cli.commands["profiles"] is _profiles.profiles_command  # registered under its name
    done = envbuild("profiles", "--json", timeout=60)
    assert done.returncode == 0, done.stderr
    assert [r["name"] for r in json.loads(done.stdout)] == BUILTINS


def test_profiles_cli_table() -> None:
    result = invoke(["profiles"])
    assert result.exit_code == 0, result.output
    for name in BUILTINS:
        assert name in result.output
    assert "Blender 4.5.3" in result.output
