"""``[blender] source``: "official" (the tarball, the default) or "pypi" (the bpy module, locked).

The bpy facts come from the catalog (envbuild/data/blender.toml: releases and bpy_python per series,
read from https://pypi.org/simple/bpy/); the profiles below are written by hand.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import envbuild

from envbuild.errors import ProfileError
from envbuild.models import Finding
from envbuild.plan import check
from envbuild.profile import load_profile
from envbuild.render import make_lock


def profile(tmp_path: Path, blender: str, python: str = "3.11") -> Path:
    path = tmp_path / "p.toml"
    path.write_text(
        f'name = "p"\nkind = "blender"\n[base]\nos = "debian12"\n[python]\nversion = "{python}"\n'
        f"[blender]\n{blender}\n",
        encoding="utf-8",
    )
    return path


def codes(findings: tuple[Finding, ...]) -> dict[str, Finding]:
    return {f.code: f for f in findings}


def test_builtin_blender_cpu_pins_bpy_and_downloads_no_tarball() -> None:
    result = check(load_profile("blender-cpu"))
    assert result.ok, result.findings
    plan = result.plan
    assert plan.blender_source == "pypi" and plan.blender_version == "4.5.15"
    assert plan.blender_url is None and plan.blender_sha256_url is None  # no tarball stage
    (line,) = [r for r in plan.requirements if r.name == "bpy"]
    assert line.text == "bpy==4.5.15" and line.origin == "profile:blender.version (blender.source = pypi)"
    lock = make_lock(plan)
    assert lock.blender_source == "pypi" and lock.blender_devices == ("CPU",)
    assert any(d.text == "bpy==4.5.15" for d in lock.declared)


def test_official_stays_the_default(tmp_path: Path) -> None:
    plan = check(load_profile(profile(tmp_path, 'version = "4.5.3"\ndevices = ["CPU"]'))).plan
    assert plan.blender_source == "official"
    assert (
        plan.blender_url == "https://download.blender.org/release/Blender4.5/blender-4.5.3-linux-x64.tar.xz"
    )
    assert not any(r.name == "bpy" for r in plan.requirements)


def test_bpy_needs_the_python_of_its_wheels(tmp_path: Path) -> None:
    result = check(load_profile(profile(tmp_path, 'version = "4.5.15"\nsource = "pypi"', python="3.12")))
    found = codes(result.findings)["E-BLENDER-BPY-PYTHON"]
    assert (
        'blender.source = "pypi": bpy 4.5.15 is built for Python 3.11 only (its wheels are cp311)'
        in found.message
    )
    assert 'set python.version = "3.11"' in found.message
    assert (
        found.source is not None and "pypi.org/simple/bpy" in found.source and "pypi.org" not in found.message
    )


def test_bpy_5_1_is_cp313(tmp_path: Path) -> None:
    result = check(load_profile(profile(tmp_path, 'version = "5.1.2"\nsource = "pypi"')))
    assert 'set python.version = "3.13"' in codes(result.findings)["E-BLENDER-BPY-PYTHON"].message


def test_series_without_linux_bpy_wheels(tmp_path: Path) -> None:
    result = check(load_profile(profile(tmp_path, 'version = "4.1.0"\nsource = "pypi"')))
    found = codes(result.findings)["E-BLENDER-BPY-UNAVAILABLE"]
    assert "no Linux bpy wheel is published for Blender 4.1" in found.message
    assert "4.5" in found.message and 'blender.source = "official"' in found.message


def test_a_skipped_patch_and_a_newer_one(tmp_path: Path) -> None:
    skipped = check(load_profile(profile(tmp_path, 'version = "4.5.5"\nsource = "pypi"')))
    assert "bpy 4.5.5 was never published" in codes(skipped.findings)["E-BLENDER-BPY-MISSING"].message
    newer = check(load_profile(profile(tmp_path, 'version = "4.5.99"\nsource = "pypi"')))
    assert newer.ok and "W-BLENDER-BPY-UNLISTED" in codes(newer.findings)


def test_bad_source_names_file_key_and_choices(tmp_path: Path) -> None:
    path = profile(tmp_path, 'version = "4.5.15"\nsource = "pip"')
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    text = str(info.value)
    assert "blender.source" in text and "'pip' is not a valid blender.source" in text
    assert "official" in text and "pypi" in text and str(path.name) in text
    proc = envbuild("check", path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "blender.source" in proc.stderr


def test_pypi_on_cuda_keeps_the_graphics_capability_for_optix(tmp_path: Path) -> None:
    from envbuild.render import render_dockerfile

    path = tmp_path / "gpu.toml"
    path.write_text(
        'name = "gpu"\nkind = "blender"\n[accelerator]\nbackend = "cuda"\ntargets = ["rtx4090"]\n'
        '[python]\nversion = "3.11"\n[blender]\nversion = "4.5.15"\nsource = "pypi"\ndevices = ["OPTIX"]\n',
        encoding="utf-8",
    )
    result = check(load_profile(path))
    assert result.ok, result.findings
    text = render_dockerfile(result.plan)
    assert 'NVIDIA_DRIVER_CAPABILITIES="compute,utility,graphics"' in text
    assert result.plan.base_image == "ubuntu:24.04"  # bpy carries its own kernels too
    assert "AS blender" not in text and "/opt/blender" not in text  # bpy: no tarball stage
