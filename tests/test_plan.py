"""Plan resolution: base image and flavor, variant, pins with local tags, indexes, apt, compiles."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from plan_support import profile, req

from envbuild.catalog import CardEntry, load_catalog
from envbuild.errors import ProfileError, UsageError
from envbuild.findings import Findings
from envbuild.models import RequirementLine
from envbuild.plan import check
from envbuild.plan.context import Context
from envbuild.plan.environment import check_glibc
from envbuild.plan.hardware import check_arch, check_toolkit_minimums
from envbuild.versions import applies_on_image, image_platforms, validate_driver, wheel_problem


def test_cuda_plan_runtime_and_pins() -> None:
    plan = check(profile(version="12.8", companions=("torchvision", "torchaudio"))).plan
    # torch's CUDA wheels bring CUDA's libraries: NVIDIA's base flavor, not a runtime or cudnn image
    assert plan.base_image == "nvidia/cuda:12.8.1-base-ubuntu24.04"
    assert plan.base_flavor == "cuda-base"
    assert [p.spec for p in plan.pins] == [
        "torch==2.7.1+cu128",
        "torchvision==0.22.1+cu128",
        "torchaudio==2.7.1+cu128",
        "triton==3.3.1",
    ]
    assert plan.index_urls[0].url == "https://download.pytorch.org/whl/cu128" and plan.index_urls[0].primary
    assert "+cu128" in plan.index_urls[0].reason
    assert plan.index_urls[1].url == "https://pypi.org/simple" and not plan.index_urls[1].primary
    assert plan.torch_arch_list[-1] == "sm_120+PTX" and plan.required_archs == ("sm_90",)
    assert plan.min_driver == "570.124.06" and plan.accelerator_version == "12.8"
    assert plan.apt == ("ca-certificates", "python3", "python3-venv")
    assert not plan.compiles


def test_compiles_selects_devel_and_toolchain() -> None:
    plan = check(profile(version="12.8", compile_extensions=True)).plan
    assert plan.compiles and plan.base_flavor == "cuda-devel"
    assert plan.base_image == "nvidia/cuda:12.8.1-devel-ubuntu24.04"
    assert {"g++", "python3-dev", "ninja-build"} <= set(plan.apt)
    assert list(plan.apt) == sorted(set(plan.apt))


def test_vcs_requirement_compiles_without_torch() -> None:
    line = req("pkg @ git+https://example.org/pkg.git@v1", "pkg")
    plan = check(profile(backend="cpu", targets=(), torch=None, lines=(line,))).plan
    assert plan.compiles and "git" in plan.apt and "g++" in plan.apt
    assert plan.requirements == (line,)
    assert plan.targets[0].id == "cpu" and plan.base_image == "ubuntu:24.04" and plan.base_flavor == "os"


def test_torch_12_has_no_torchaudio_pin_and_2_13_cpu() -> None:
    plan = check(profile(backend="cpu", targets=(), torch="2.13.0", os="debian12", python="3.11")).plan
    assert [p.spec for p in plan.pins] == ["torch==2.13.0+cpu"]
    assert plan.index_urls[0].url == "https://download.pytorch.org/whl/cpu"
    assert plan.base_image == "debian:12" and plan.python_provision == "system"
    assert plan.torch_variant == "cpu" and plan.min_driver is None


def test_rocm_plan() -> None:
    plan = check(profile(backend="rocm", targets=("mi300x",), companions=("torchvision",))).plan
    assert plan.torch_variant == "rocm6.3"  # newest ROCm variant of 2.7.1
    assert plan.base_image == "rocm/dev-ubuntu-24.04:6.3" and plan.base_flavor == "rocm-dev"
    assert [p.spec for p in plan.pins] == [
        "torch==2.7.1+rocm6.3",
        "torchvision==0.22.1+rocm6.3",
        "pytorch-triton-rocm==3.3.1",
    ]
    assert "gfx942" in plan.torch_arch_list and plan.required_archs == ("gfx942",)
    compiled = check(profile(backend="rocm", targets=("mi300x",), compile_extensions=True)).plan
    assert (
        compiled.base_image == "rocm/dev-ubuntu-24.04:6.3-complete"
        and compiled.base_flavor == "rocm-complete"
    )


def test_derived_variant_is_pypi_default_unless_it_lacks_the_card() -> None:
    h100 = check(profile()).plan
    assert h100.torch_variant == "cu126"  # PyPI default of 2.7.1
    b200 = check(profile(targets=("b200",)))
    assert b200.plan.torch_variant == "cu128" and b200.ok
    assert any(f.code == "I-VARIANT-DERIVED" and "cu126 has no cubins" in f.message for f in b200.findings)


def test_targets_override_and_unknown_target() -> None:
    plan = check(profile(targets=("h100",)), targets=["h200", "h200"]).plan
    assert [c.id for c in plan.targets] == ["h200"]
    with pytest.raises(UsageError, match=r"unknown target 'h999'; valid targets: .*b200.*mi300x"):
        check(profile(), targets=["h999"])


@pytest.mark.parametrize("bad", ["abc", "570", "57.1", "570.124.06.1", "570.124.06; rm -rf /", ""])
def test_driver_validation(bad: str) -> None:
    with pytest.raises(UsageError, match="--driver"):
        validate_driver(bad)
    with pytest.raises(UsageError):
        check(profile(), driver=bad)


def test_python_provisioning() -> None:
    assert check(profile(python="3.11")).plan.python_provision == "deadsnakes"
    plan = check(profile(python="3.11", compile_extensions=True)).plan
    assert {"python3.11", "python3.11-venv", "python3.11-dev"} <= set(plan.apt)
    assert check(profile(os="ubuntu22.04", python="3.10")).plan.python_provision == "system"
    result = check(profile(os="debian12", python="3.12", backend="cpu", targets=()))
    (f,) = [f for f in result.findings if f.code == "E-PYTHON-OS"]
    assert "3.11 (system)" in f.message and "ubuntu24.04" in f.message


def test_blender_plan() -> None:
    plan = check(profile(torch=None, blender="4.5.3", devices=("OPTIX",), kind="blender")).plan
    assert (
        plan.blender_url == "https://download.blender.org/release/Blender4.5/blender-4.5.3-linux-x64.tar.xz"
    )
    assert plan.blender_sha256_url == "https://download.blender.org/release/Blender4.5/blender-4.5.3.sha256"
    assert {"libgl1", "libxi6", "xz-utils"} <= set(plan.apt)
    # Blender carries its own kernels: the plain OS image; the toolkit only sets the driver floor
    assert (plan.base_image, plan.base_flavor) == ("ubuntu:24.04", "os") and plan.min_driver == "560.35.05"


def test_user_lines_superseded_by_pins() -> None:
    keep = req("numpy==2.1.3", "numpy", "requirements.txt:2")
    drop = req("torchvision>=0.20", "torchvision", "requirements.txt:3")
    plan = check(profile(lines=(keep, drop))).plan
    assert plan.requirements == (keep,)
    assert "torchvision" in [p.name for p in plan.pins]


def test_user_index_url_option_warns() -> None:
    opt = RequirementLine(kind="option", text="--index-url https://example.org/simple", origin="r.txt:1")
    result = check(profile(lines=(opt,)))
    assert "W-USER-INDEX-URL" in {f.code for f in result.findings}


def _ctx(card: CardEntry, torch: str, variant: str) -> Context:
    cat = load_catalog()
    rel, patch = cat.find_torch(torch)  # type: ignore[misc]
    ctx = Context(catalog=cat, profile=profile(), cards=[card], os=cat.os("ubuntu24.04"), driver=None)  # type: ignore[arg-type]
    ctx.release, ctx.patch, ctx.variant = rel, patch, variant
    ctx.cuda_wheel = next(w for w in rel.cuda if w.variant == variant)
    ctx.toolkit = cat.cuda_toolkit(variant)
    return ctx


def _card(arch: str) -> CardEntry:
    return CardEntry(
        id="synthetic",
        name="Synthetic",
        vendor="nvidia",
        arch=arch,
        memory_gib=16,
        cards_per_lot=1,
        tier="P",
        source="test card (synthetic arch)",
    )


def test_ptx_jit_path_warns() -> None:
    out = Findings()
    check_arch(_ctx(_card("sm_130"), "2.7.1", "cu128"), out)  # newer than sm_120, covered by +PTX only
    assert out.codes() == ["W-ARCH-PTX-JIT"]
    out = Findings()
    check_arch(_ctx(_card("sm_130"), "2.8.0", "cu128"), out)  # 2.8 cu128 has no +PTX
    assert out.codes() == ["E-ARCH-MISSING"]
    out = Findings()
    check_arch(_ctx(_card("sm_110"), "2.9.1", "cu130"), out)  # 12.0 PTX cannot JIT for CC 11.0
    assert out.codes() == ["E-ARCH-MISSING"]


def test_triton_on_turing_warns_from_2_7() -> None:
    out = Findings()
    check_toolkit_minimums(_ctx(_card("sm_75"), "2.7.1", "cu128"), out)
    assert "W-TRITON-ARCH" in out.codes()
    out = Findings()
    check_toolkit_minimums(_ctx(_card("sm_75"), "2.6.0", "cu126"), out)
    assert "W-TRITON-ARCH" not in out.codes()


def test_glibc_rule() -> None:
    ctx = _ctx(_card("sm_90"), "2.7.1", "cu128")
    out = Findings()
    check_glibc(ctx, out)
    assert out.codes() == []
    ctx.os = replace(ctx.os, glibc="2.27", name="Old Linux")
    check_glibc(ctx, out)
    assert out.codes() == ["E-GLIBC"]


@pytest.mark.parametrize(
    ("url", "python", "glibc", "ok"),
    [
        ("https://x/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl", "3.11", "2.36", True),
        ("https://x/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl", "3.11", "2.27", False),
        ("https://x/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl", "3.12", "2.39", False),
        ("https://x/old-1.0-cp310-cp310-manylinux2014_x86_64.whl", "3.10", "2.35", True),
        ("https://x/old-1.0-cp310-cp310-manylinux1_x86_64.whl", "3.10", "2.35", True),
        ("https://x/abi-1.0-cp39-abi3-manylinux_2_17_x86_64.whl", "3.12", "2.39", True),
        ("https://x/arm-1.0-cp312-cp312-manylinux_2_28_aarch64.whl", "3.12", "2.39", False),
        ("https://x/musl-1.0-cp312-cp312-musllinux_1_2_x86_64.whl", "3.12", "2.39", False),
        ("https://x/win-1.0-cp312-cp312-win_amd64.whl", "3.12", "2.39", False),
        ("https://x/notawheel.whl", "3.12", "2.39", False),
    ],
)
def test_wheel_tags(url: str, python: str, glibc: str, ok: bool) -> None:
    assert (wheel_problem(url, python, glibc) is None) is ok


def test_image_platforms() -> None:
    tags = image_platforms("2.36")
    assert (
        tags[0] == "manylinux_2_36_x86_64" and "manylinux2014_x86_64" in tags and "manylinux1_x86_64" in tags
    )
    assert "manylinux_2_37_x86_64" not in tags


@pytest.mark.parametrize(
    ("text", "python", "applies"),
    [
        ("numpy>=1", "3.9", True),
        ("tomli>=2; python_version < '3.11'", "3.12", False),
        ("tomli>=2; python_version < '3.11'", "3.10", True),
        ("pywin32; sys_platform == 'win32'", "3.12", False),
        ("x; platform_machine == 'x86_64' and python_full_version >= '3.12.0'", "3.12", True),
        ("x; extra == 'gpu'", "3.12", False),
        ("x; python_version ~= 'abc'", "3.12", True),  # undecidable: assumed to apply
    ],
)
def test_markers_on_the_image(text: str, python: str, applies: bool) -> None:
    """The image is CPython ``python`` on x86_64 Linux; pip skips a line whose marker excludes it."""
    assert applies_on_image(Requirement(text), python) is applies


def test_unknown_torch_is_a_profile_error_suggesting_newest_ga() -> None:
    with pytest.raises(ProfileError) as err:
        check(profile(torch="1.13.1"))
    (issue,) = err.value.issues  # issue 37: the file and key of the profile, E-PROFILE
    assert (issue.file, issue.key) == ("test.toml", "torch.version")
    assert "2.14.1" in str(err.value)  # the newest confirmed release
    assert "envbuild catalog refresh" in str(err.value)
    # Before an index is asked (check --resolve's first pass) it is a finding, and no pin is made.
    result = check(profile(torch="1.13.1"), strict_torch=False)
    (f,) = [f for f in result.findings if f.code == "E-TORCH-UNKNOWN"]
    assert "2.14.1" in f.message and result.plan.pins == () and result.plan.torch_version is None


def test_series_resolves_to_newest_patch() -> None:
    result = check(profile(torch="2.7", version="12.8"))
    assert result.plan.torch_version == "2.7.1"
    assert "I-TORCH-PATCH" in {f.code for f in result.findings}


def test_version_ignored_for_cpu() -> None:
    result = check(profile(backend="cpu", targets=(), torch=None, version="12.8"))
    assert "W-VERSION-IGNORED" in {f.code for f in result.findings}
    assert result.plan.accelerator_version is None


def _hashed(text: str, name: str) -> RequirementLine:
    return RequirementLine(
        kind="requirement", text=text, name=name, hashes=("sha256:" + "a" * 64,), origin="r:1"
    )


def test_hash_locked_input_is_accepted_and_the_lock_hashes_the_rest() -> None:
    hashed = _hashed("numpy==2.1.3", "numpy")
    with_torch = check(profile(lines=(hashed,)))
    assert with_torch.ok
    (f,) = [f for f in with_torch.findings if f.code == "I-HASH-MODE"]
    assert f.severity == "info" and "torch==2.7.1+cu126" in f.message and "envbuild lock" in f.message
    fully = check(profile(backend="cpu", targets=(), torch=None, lines=(hashed,), kind="custom"))  # no torch
    (f,) = [f for f in fully.findings if f.code == "I-HASH-MODE"]
    assert "carry none" not in f.message
    plain = check(profile(backend="cpu", targets=(), torch=None, lines=(req("tqdm==4.67.1", "tqdm"),)))
    assert "I-HASH-MODE" not in {f.code for f in plain.findings}


def test_require_hashes_option_counts() -> None:
    opt = RequirementLine(kind="option", text="--require-hashes", origin="r.txt:1")
    result = check(profile(backend="cpu", targets=(), torch=None, lines=(opt, req("tqdm==4.67.1", "tqdm"))))
    (f,) = [f for f in result.findings if f.code == "I-HASH-MODE"]
    assert f.message.startswith("r.txt:1 is hash-locked") and "carry none yet" in f.message


def test_unknown_target_in_profile_names_the_key() -> None:
    with pytest.raises(ProfileError, match=r"test.toml: accelerator.targets\[0\]: unknown target 'a100'"):
        check(profile(targets=("a100",)))
    with pytest.raises(UsageError, match=r"^--target: unknown target"):
        check(profile(), targets=["a100"])


def test_every_registered_code_is_used_and_vice_versa() -> None:
    import re
    from pathlib import Path

    import envbuild.lock
    import envbuild.plan
    from envbuild.findings import CODES

    # check (envbuild/plan), the hardware rules (envbuild/hardware), and its resolution (envbuild/lock,
    # cli/_check.py for I-RESOLVED)
    folders = [Path(envbuild.plan.__file__).parent, Path(envbuild.lock.__file__).parent]
    folders.append(Path(envbuild.plan.__file__).parent.parent / "hardware")  # the hardware rules (issue 26)
    files = [p for folder in folders for p in folder.glob("*.py") if p.name != "findings.py"]
    files.append(Path(envbuild.plan.__file__).parent.parent / "cli" / "_check.py")
    files.append(Path(envbuild.plan.__file__).parent.parent / "catalog" / "overlay.py")  # the overlay hook
    source = "".join(p.read_text(encoding="utf-8") for p in files)
    # an error class's own code (``code = "E-RESOLVE"``, the CLI's JSON) is not a plan finding
    used = set(re.findall(r'(?<!code = )"([EWI]-[A-Z0-9-]+)"', source))
    assert used == set(CODES)
    with pytest.raises(ValueError, match="not registered"):
        Findings().error("E-NOT-A-CODE", "x")
    with pytest.raises(ValueError, match="not registered"):
        Findings().warning("E-ARCH-MISSING", "wrong severity")


def test_a_pin_and_a_range_that_excludes_it_conflict_before_any_index() -> None:
    lines = (req("numpy==2.2.6", "numpy", "profile:python.packages[0]"), req("numpy<2", "numpy", "r.txt:3"))
    result = check(profile(backend="cpu", targets=(), torch=None, lines=lines))
    (f,) = [f for f in result.findings if f.code == "E-REQ-CONFLICT"]
    assert f.message.startswith("numpy: profile:python.packages[0] pins 'numpy==2.2.6' but r.txt:3 asks for")
    compatible = (lines[0], req("numpy>=2", "numpy", "r.txt:3"))
    ok = check(profile(backend="cpu", targets=(), torch=None, lines=compatible))
    assert ok.ok and "E-REQ-CONFLICT" not in {f.code for f in ok.findings}
    assert "I-NOT-RESOLVED" in {f.code for f in ok.findings}  # check never claims pip can install it


def test_an_unknown_target_gets_a_did_you_mean() -> None:
    with pytest.raises(
        UsageError, match=r"unknown target '4090' \(did you mean 'rtx4090'\?\); valid targets:"
    ):
        check(profile(), targets=["4090"])
    with pytest.raises(UsageError, match=r"unknown target 'zzz'; valid targets:"):  # nothing close: no guess
        check(profile(), targets=["zzz"])


def test_an_inherited_version_of_another_backend_is_named_and_ignored(tmp_path: Path) -> None:
    """The issue's case: extending pytorch (CUDA 13.0) with backend = "rocm" works in one round."""
    from envbuild.profile import load_profile

    def write(name: str, accelerator: str) -> Path:
        path = tmp_path / f"{name}.toml"
        path.write_text(
            f'name = "{name}"\nkind = "pytorch"\nextends = "pytorch"\n[accelerator]\n{accelerator}'
        )
        return path

    rocm = check(load_profile(str(write("r", 'backend = "rocm"\ntargets = ["mi300x"]\n'))))
    (f,) = [f for f in rocm.findings if f.code == "I-VERSION-INHERITED"]
    assert f.message.startswith(
        "accelerator.version = \"13.0\" (inherited from profile 'pytorch') is not a ROCm version"
    )
    assert rocm.ok and rocm.plan.torch_variant is not None and rocm.plan.torch_variant.startswith("rocm")
    # set in the profile itself: not second-guessed
    own = check(load_profile(str(write("o", 'backend = "rocm"\nversion = "13.0"\ntargets = ["mi300x"]\n'))))
    assert "E-VARIANT-UNAVAILABLE" in {f.code for f in own.findings}
    # inherited and valid for the backend: kept
    cuda = check(load_profile(str(write("c", 'backend = "cuda"\ntargets = ["b200"]\n'))))
    assert cuda.plan.torch_variant == "cu130" and "I-VERSION-INHERITED" not in {f.code for f in cuda.findings}


def test_every_project_with_a_conflicting_pin_is_named() -> None:
    lines = (
        req("numpy==2.2.6", "numpy", "p:0"),
        req("numpy<2", "numpy", "r.txt:1"),
        req("tqdm==4.67.1", "tqdm", "p:1"),
        req("tqdm<4", "tqdm", "r.txt:2"),
    )
    result = check(profile(backend="cpu", targets=(), torch=None, lines=lines))
    named = [f.message.split(":", 1)[0] for f in result.findings if f.code == "E-REQ-CONFLICT"]
    assert named == ["numpy", "tqdm"]
