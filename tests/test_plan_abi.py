"""ABI-coupled packages (envbuild/plan/abi.py, envbuild/data/abi.toml): wheel builds and pinned releases
against the planned torch, CUDA/ROCm variant and C++ ABI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from plan_support import profile, req

from envbuild.errors import CatalogError
from envbuild.models import CheckResult, Finding
from envbuild.plan import check
from envbuild.plan.abi_data import load_abi_data
from envbuild.resources import catalog_dir

RELEASES = "https://github.com/Dao-AILab/flash-attention/releases/download/v2.8.3/"
FLASH = RELEASES + "flash_attn-2.8.3+cu12torch2.7cxx11abiTRUE-cp311-cp311-linux_x86_64.whl"
PYG = "https://data.pyg.org/whl/torch-2.5.0%2Bcu124/torch_scatter-2.1.2%2Bpt25cu124-cp311-cp311-linux_x86_64.whl"
GPU_2_5 = {"torch": "2.5.1", "version": "12.4", "os": "ubuntu22.04"}  # cu124 images exist for 22.04


def plan(*lines: tuple[str, str], **kwargs: Any) -> CheckResult:
    kwargs.setdefault("python", "3.11")
    return check(profile(lines=tuple(req(text, name) for text, name in lines), **kwargs))


def abi(result: CheckResult) -> list[Finding]:
    return [f for f in result.findings if "-ABI-" in f.code]


def test_flash_attn_wheel_for_another_torch_series_names_what_works() -> None:
    (f,) = abi(plan((f"flash-attn @ {FLASH}", "flash-attn"), torch="2.9.1"))
    assert f.code == "E-ABI-MISMATCH"
    assert "built for torch 2.7 / CUDA 12 / the C++11 ABI, but the plan installs torch 2.9.1+cu128" in (
        f.message
    )
    assert "flash-attn 2.8.3's release builds torch 2.4, 2.5, 2.6, 2.7, 2.8 with CUDA 12 only" in f.message
    assert "(+cu12torch2.9cxx11abiTRUE, cp311)" in f.message
    assert f.message.endswith('or set torch.version = "2.7.1" to keep this wheel')
    for version in ("12.6", "12.8"):
        result = plan((f"flash-attn @ {FLASH}", "flash-attn"), torch="2.7.1", version=version)
        assert result.ok and abi(result) == []


def test_a_cuda_build_on_rocm_is_an_error() -> None:
    result = plan((f"flash-attn @ {FLASH}", "flash-attn"), backend="rocm", targets=("mi300x",))
    (f,) = abi(result)
    assert f.code == "E-ABI-MISMATCH" and not result.ok
    assert "the plan installs torch 2.7.1+rocm6.3: a CUDA build cannot load next to a ROCm torch" in f.message


def test_a_pre_cxx11_abi_build_with_torch_2_7_is_an_error_naming_the_abi_true_wheel() -> None:
    false = FLASH.replace("cxx11abiTRUE", "cxx11abiFALSE")
    (f,) = abi(plan((f"flash-attn @ {false}", "flash-attn"), torch="2.7.1"))
    assert f.code == "E-ABI-MISMATCH"
    assert "torch 2.7.1 wheels use the C++11 ABI, so a build with the pre-C++11 ABI fails" in f.message
    assert f.message.endswith(f"Use the same release's wheel for this plan, {FLASH}")


def test_torch_2_6_abi_depends_on_the_variant() -> None:
    wheel = FLASH.replace("torch2.7cxx11abiTRUE", "torch2.6cxx11abiFALSE")
    line = (f"flash-attn @ {wheel}", "flash-attn")
    assert abi(plan(line, torch="2.6.0", version="12.4")) == []  # cu124: pre-C++11 ABI
    (f,) = abi(plan(line, torch="2.6.0", version="12.6"))  # cu126 builds use the C++11 ABI
    assert f.code == "E-ABI-MISMATCH" and "torch 2.6.0 wheels use the C++11 ABI" in f.message


def test_pyg_wheel_needs_its_torch_series_and_cuda_variant() -> None:
    ok = plan((f"torch-scatter @ {PYG}", "torch-scatter"), **GPU_2_5)
    assert ok.ok and ok.plan.torch_variant == "cu124" and abi(ok) == []
    (f,) = abi(plan((f"torch-scatter @ {PYG}", "torch-scatter"), torch="2.7.1"))
    assert f.code == "E-ABI-MISMATCH"
    assert "is built for torch 2.5 / CUDA 12.4, but the plan installs torch 2.7.1+cu126" in f.message
    assert "Use the torch-scatter wheel built for torch 2.7 and cu126 (+pt27cu126)" in f.message
    assert 'or set torch.version = "2.5.1" and accelerator.version = "12.4" to keep this wheel' in f.message


def test_a_pinned_local_version_is_read_like_a_wheel_name() -> None:
    pin = ("torch-scatter==2.1.2+pt25cu124", "torch-scatter")  # with -f https://data.pyg.org/whl/...
    assert abi(plan(pin, **GPU_2_5)) == []
    (f,) = abi(plan(pin, torch="2.7.1"))
    assert f.message.startswith("requirements.txt:1: torch-scatter==2.1.2+pt25cu124 is built for torch 2.5")


def test_a_cpu_only_build_next_to_a_gpu_torch_warns() -> None:
    cpu = PYG.replace("pt25cu124", "pt25cpu")
    result = plan((f"torch-scatter @ {cpu}", "torch-scatter"), **GPU_2_5)
    assert result.ok and [f.code for f in abi(result)] == ["W-ABI-NO-GPU"]


def test_xformers_pin_requires_its_own_torch() -> None:
    (f,) = abi(plan(("xformers==0.0.28.post3", "xformers"), torch="2.7.1"))
    assert f.code == "E-ABI-MISMATCH"
    assert f.message.endswith(
        "xformers 0.0.28.post3 requires torch==2.5.1 (its wheels are built against that torch), but the plan "
        "installs torch 2.7.1+cu126: use xformers==0.0.31.post1 (it requires torch==2.7.1); or set "
        'torch.version = "2.5.1"'
    )
    ok = plan(("xformers==0.0.28.post3", "xformers"), **GPU_2_5)
    assert ok.ok and abi(ok) == []


def test_bitsandbytes_needs_a_gpu_library_for_the_variant() -> None:
    (f,) = abi(plan(("bitsandbytes==0.45.5", "bitsandbytes"), torch="2.8.0", version="12.9"))
    assert "its wheel carries GPU libraries for CUDA 11.7, " in f.message
    assert f.message.endswith("so its GPU functions fail to load on CUDA 12.9: use bitsandbytes==0.49.2")
    assert abi(plan(("bitsandbytes==0.49.2", "bitsandbytes"), torch="2.8.0", version="12.9")) == []


def test_torchao_kernels_for_another_torch_warn_or_fail() -> None:
    assert abi(plan(("torchao==0.15.0", "torchao"), torch="2.9.1")) == []
    (w,) = abi(plan(("torchao==0.16.0", "torchao"), torch="2.9.1"))
    assert w.code == "W-ABI-KERNELS-SKIPPED"
    assert "only its Python API supports torch 2.9: use torchao==0.15.0" in w.message
    (e,) = abi(plan(("torchao==0.16.0", "torchao"), **GPU_2_5))
    assert e.code == "E-ABI-MISMATCH"
    assert "torchao 0.16.0 supports torch 2.10.0, 2.9.0, 2.8.0, not torch 2.5.1+cu124" in e.message


def test_flash_attn_pin_points_at_the_release_wheel_when_one_fits() -> None:
    (f,) = abi(plan(("flash-attn==2.8.3", "flash-attn"), torch="2.7.1", python="3.12"))
    assert f.code == "I-ABI-WHEEL-URL"
    wheel = "flash_attn-2.8.3+cu12torch2.7cxx11abiTRUE-cp312-cp312-linux_x86_64.whl"
    assert f.message.endswith(f"write 'flash-attn @ {RELEASES}{wheel}'")
    (none,) = abi(plan(("flash-attn==2.8.3", "flash-attn"), torch="2.9.1", python="3.12"))
    assert "its GitHub release builds none for torch 2.9.1+cu128 with Python 3.12" in none.message


@pytest.mark.parametrize(
    "line",
    [
        ("numpy==2.2.6", "numpy"),
        ("xformers==0.0.1", "xformers"),  # a release abi.toml does not record
        ("fast @ https://example.org/fast-1.0-cp311-cp311-manylinux_2_28_x86_64.whl", "fast"),
        ("odd @ https://example.org/odd-1.0%2Blocal7-cp311-cp311-linux_x86_64.whl", "odd"),
    ],
)
def test_packages_and_builds_not_in_the_data_get_no_finding(line: tuple[str, str]) -> None:
    assert abi(plan(line, torch="2.9.1")) == []


def test_a_malformed_abi_row_names_the_file_and_row(tmp_path: Path) -> None:
    text = (catalog_dir() / "abi.toml").read_text(encoding="utf-8")
    bad = tmp_path / "abi.toml"
    bad.write_text(text.replace('version = "0.0.30"', 'version = "not a version"'), encoding="utf-8")
    with pytest.raises(CatalogError, match=r"abi.toml: xformers\[\d+\].*version"):
        load_abi_data(bad)
