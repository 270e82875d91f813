"""Current built-in data (issue 9 item 1): torch up to 2.15.0, Blender up to 5.3, and the two defaults.

Profiles are written as TOML and loaded, so ``Profile.sources`` records what the file leaves out
(``base.os`` / ``torch.version`` absent), as it does for a user.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuild.catalog import load_catalog
from envbuild.models import CheckResult
from envbuild.plan import check
from envbuild.profile import load_profile


def _check(tmp_path: Path, text: str, name: str = "p.toml") -> CheckResult:
    path = tmp_path / name
    path.write_text('name = "p"\n' + text, encoding="utf-8")
    return check(load_profile(str(path)))


def _codes(result: CheckResult) -> set[str]:
    return {f.code for f in result.findings}


def _finding(result: CheckResult, code: str) -> str:
    (message,) = [f.message for f in result.findings if f.code == code]
    return message


CUDA_H100 = '[accelerator]\nbackend = "cuda"\ntargets = ["h100"]\n[python]\nversion = "3.12"\n'


# ---- torch -------------------------------------------------------------------------------------------


def test_torch_2_15_0_checks_with_the_unconfirmed_warning(tmp_path: Path) -> None:
    result = _check(tmp_path, 'kind = "pytorch"\n' + CUDA_H100 + '[torch]\nversion = "2.15.0"\n')
    assert result.ok and "E-TORCH-UNKNOWN" not in _codes(result)
    plan = result.plan
    assert (plan.torch_version, plan.torch_variant) == ("2.15.0", "cu132")  # the PyPI build (its wheel)
    assert plan.torch_arch_list == ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")
    message = _finding(result, "W-TORCH-UNCONFIRMED")  # the index's other variants are not confirmed
    assert "2.15.0" in message and "cu132" in message


def test_torch_2_15_0_unconfirmed_variant_is_named(tmp_path: Path) -> None:
    text = 'kind = "pytorch"\n' + CUDA_H100.replace(
        'targets = ["h100"]', 'targets = ["h100"]\nversion = "13.0"'
    )
    result = _check(tmp_path, text + '[torch]\nversion = "2.15.0"\n')
    assert result.plan.torch_variant == "cu130"
    (finding,) = [f for f in result.findings if f.code == "W-TORCH-UNCONFIRMED"]
    assert "(cu130) is not confirmed" in finding.message
    # the catalog rows behind it (the release's, the variant's) are its source, not its message
    assert finding.source and "cu130 wheels: " in finding.source and "unconfirmed" in finding.source


@pytest.mark.parametrize("version", ["2.14.0", "2.14.1"])
def test_torch_2_14_is_known_and_confirmed(tmp_path: Path, version: str) -> None:
    result = _check(tmp_path, 'kind = "pytorch"\n' + CUDA_H100 + f'[torch]\nversion = "{version}"\n')
    assert result.ok and result.plan.torch_version == version
    assert not {"E-TORCH-UNKNOWN", "W-TORCH-UNCONFIRMED"} & _codes(result)
    assert result.plan.torch_variant == "cu130"  # the PyPI build of 2.14.x (torch/version.py)


def test_companions_of_2_15_come_from_the_data(tmp_path: Path) -> None:
    text = 'kind = "pytorch"\n' + CUDA_H100 + '[torch]\nversion = "2.15.0"\npackages = ["torchvision"]\n'
    result = _check(tmp_path, text)
    _, patch = load_catalog().find_torch("2.15.0")  # type: ignore[misc]
    assert patch.torchvision == "0.29.2"  # no torchvision 0.30 on PyPI: not the 2.N -> 0.(N+15) rule
    assert [p.spec for p in result.plan.pins] == [
        "torch==2.15.0+cu132",
        "torchvision==0.29.2+cu132",
        "triton==3.9.0",
    ]


def test_newest_confirmed_release_is_2_14_1() -> None:
    from envbuild.plan.context import Context
    from envbuild.plan.resolve import confirmed_releases

    catalog = load_catalog()
    ctx = Context(
        catalog=catalog,
        profile=load_profile("ubuntu"),
        cards=[],
        os=catalog.oses[0],
        driver=None,
    )
    rel, patch = confirmed_releases(ctx)[0]
    assert (rel.series, rel.status, patch.version) == ("2.14", "ga", "2.14.1")
    assert "2.15.0" in catalog.release_versions()


# ---- Blender -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("version", "series"), [("4.5.15", "4.5"), ("5.0.1", "5.0"), ("5.3.0", "5.3")])
def test_blender_releases_are_known(tmp_path: Path, version: str, series: str) -> None:
    row = load_catalog().blender_series(version)
    assert row is not None and row.series == series and version in row.releases
    text = (
        'kind = "blender"\n[accelerator]\nbackend = "cuda"\ntargets = ["rtx4090"]\n'
        f'[python]\nversion = "3.12"\n[blender]\nversion = "{version}"\ndevices = ["OPTIX"]\n'
    )
    result = _check(tmp_path, text)
    assert result.ok and "E-BLENDER-UNKNOWN" not in _codes(result)
    assert result.plan.blender_url == (
        f"https://download.blender.org/release/Blender{series}/blender-{version}-linux-x64.tar.xz"
    )


def test_blender_series_warning_names_the_newest_known_patch(tmp_path: Path) -> None:
    text = (
        'kind = "blender"\n[accelerator]\nbackend = "cuda"\ntargets = ["rtx4090"]\n'
        '[python]\nversion = "3.12"\n[blender]\nversion = "4.5"\ndevices = ["OPTIX"]\n'
    )
    assert "4.5.15" in _finding(_check(tmp_path, text), "W-BLENDER-PATCH")


# ---- defaults ----------------------------------------------------------------------------------------


def test_pytorch_without_torch_version_installs_the_newest_confirmed_release(tmp_path: Path) -> None:
    result = _check(tmp_path, 'kind = "pytorch"\n' + CUDA_H100)
    assert result.ok
    assert result.plan.torch_version == "2.14.1"
    assert result.plan.pins[0].spec == "torch==2.14.1+cu130"
    message = _finding(result, "I-TORCH-DEFAULT")
    assert "2.14.1" in message and "newest release the catalog has confirmed" in message


def test_rocm_6_1_on_mi300x_without_base_os_chooses_the_os_with_the_image(tmp_path: Path) -> None:
    text = (
        'kind = "pytorch"\n[accelerator]\nbackend = "rocm"\nversion = "6.1"\ntargets = ["mi300x"]\n'
        '[python]\nversion = "3.12"\n[torch]\nversion = "2.6.0"\n'
    )
    result = _check(tmp_path, text)
    assert result.ok, result.findings
    assert (result.plan.os, result.plan.base_image) == ("ubuntu22.04", "rocm/dev-ubuntu-22.04:6.1")
    # the validator's HIP op compiles in the builder stage, on the -complete image (hipcc)
    assert result.plan.builder_image == "rocm/dev-ubuntu-22.04:6.1-complete"
    assert result.plan.probe_ops == ("cpp", "rocm")
    message = _finding(result, "I-OS-DERIVED")
    assert "ubuntu22.04" in message and "ROCm 6.1" in message and "ubuntu24.04" in message


def test_rocm_6_1_with_an_explicit_ubuntu24_04_is_still_refused(tmp_path: Path) -> None:
    text = (
        'kind = "pytorch"\n[base]\nos = "ubuntu24.04"\n'
        '[accelerator]\nbackend = "rocm"\nversion = "6.1"\ntargets = ["mi300x"]\n'
        '[python]\nversion = "3.12"\n[torch]\nversion = "2.6.0"\n'
    )
    result = _check(tmp_path, text)
    assert not result.ok and "E-BASE-UNAVAILABLE" in _codes(result)
    assert "I-OS-DERIVED" not in _codes(result) and result.plan.os == "ubuntu24.04"


def test_rocm_6_1_without_torch_version_or_os(tmp_path: Path) -> None:
    # both defaults at once: the newest confirmed torch with rocm6.1 wheels, on the OS with its image
    text = (
        'kind = "pytorch"\n[accelerator]\nbackend = "rocm"\nversion = "6.1"\ntargets = ["mi300x"]\n'
        '[python]\nversion = "3.12"\n'
    )
    result = _check(tmp_path, text)
    assert result.ok, result.findings
    assert (result.plan.torch_version, result.plan.torch_variant, result.plan.os) == (
        "2.6.0",
        "rocm6.1",
        "ubuntu22.04",
    )
    assert "2.14.1" in _finding(result, "I-TORCH-DEFAULT")  # names the newest confirmed one too


def test_os_from_a_parent_profile_is_explicit(tmp_path: Path) -> None:
    (tmp_path / "base.toml").write_text(
        'name = "base"\nkind = "pytorch"\n[base]\nos = "ubuntu24.04"\n', encoding="utf-8"
    )
    text = (
        'kind = "pytorch"\nextends = "base.toml"\n'
        '[accelerator]\nbackend = "rocm"\nversion = "6.1"\ntargets = ["mi300x"]\n'
        '[python]\nversion = "3.12"\n[torch]\nversion = "2.6.0"\n'
    )
    result = _check(tmp_path, text)
    assert "E-BASE-UNAVAILABLE" in _codes(result) and result.plan.os == "ubuntu24.04"


# ---- the built-in pytorch profile ---------------------------------------------------------------------


@pytest.mark.parametrize("target", ["h100", "h200", "b200", "rtx4090", "rtx5090", "a100-80gb"])
def test_builtin_pytorch_is_the_current_release_on_every_nvidia_target(target: str) -> None:
    result = check(load_profile("pytorch"), targets=[target])
    assert result.ok, result.findings
    assert (result.plan.torch_version, result.plan.torch_variant) == ("2.14.1", "cu130")
    assert not {"W-TORCH-UNCONFIRMED", "E-ARCH-MISSING", "W-ARCH-PTX-JIT"} & _codes(result)


def test_torch_named_in_requirements_gets_no_default(tmp_path: Path) -> None:
    text = 'kind = "pytorch"\n' + CUDA_H100.replace(
        'version = "3.12"', 'version = "3.12"\npackages = ["torch==2.7.1"]'
    )
    result = _check(tmp_path, text)
    assert "I-TORCH-DEFAULT" not in _codes(result)
    # issue 37: the exact pin is the plan's torch before resolution (no default, no W-TORCH-UNDECLARED)
    assert "W-TORCH-UNDECLARED" not in _codes(result) and result.plan.torch_version == "2.7.1"
