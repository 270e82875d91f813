"""Adversarial review of `envbuild check --json` against ../shared/design/compat-facts.md.

Two kinds of tests:

* ``CASES``: profiles written as TOML and run through the CLI (``check --json``), each with the
  compat-facts row it comes from.  Rows marked "fixed:" were wrong verdicts found in the review.
* sweeps: compat-facts tables re-typed by hand here (not read from the catalog) and compared with
  the planner's verdict for every release x variant x card / Python.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_support import invoke
from plan_support import profile

import envbuild.cli._check  # noqa: F401  (registers the command)
from envbuild.plan import check

W = "https://example.org/w/"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    return "[" + ", ".join(_toml(v) for v in value) + "]"


def write_profile(tmp: Path, **kw: Any) -> Path:
    """A full profile; every key has a default that passes (H100, torch 2.7.1, Ubuntu 24.04, 3.12)."""
    o: dict[str, Any] = {
        "kind": "pytorch",
        "os": "ubuntu24.04",
        "backend": "cuda",
        "targets": ["h100"],
        "python": "3.12",
        "torch": "2.7.1",
        "companions": [],
        "packages": [],
    }
    o.update(kw)
    lines = ['name = "review"', f"kind = {_toml(o['kind'])}", "[base]", f"os = {_toml(o['os'])}"]
    lines += ["[accelerator]", f"backend = {_toml(o['backend'])}", f"targets = {_toml(o['targets'])}"]
    if o.get("version"):
        lines.append(f"version = {_toml(o['version'])}")
    lines += ["[python]", f"version = {_toml(o['python'])}", f"packages = {_toml(o['packages'])}"]
    if o.get("requirements"):
        lines.append(f"requirements = {_toml(o['requirements'])}")
    if o["torch"]:
        lines += ["[torch]", f"version = {_toml(o['torch'])}", f"packages = {_toml(o['companions'])}"]
    if o.get("blender"):
        lines += ["[blender]", f"version = {_toml(o['blender'])}", f"devices = {_toml(o['devices'])}"]
    if "memory" in o or "gpus" in o:
        lines.append("[resources]")
        lines += [f"gpu_memory_gib = {o['memory']}"] if "memory" in o else []
        lines += [f"gpus = {o['gpus']}"] if "gpus" in o else []
    lines += ["[validate]", "compile_extensions = false"]
    path = tmp / "review.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run_check(path: Path | str, *args: str, expect: int) -> dict[str, Any]:
    """``check --json``: its exit status must be ``expect`` (0: no error finding, 1: error findings)."""
    result = invoke(["check", str(path), "--json", *args])
    assert result.exit_code == expect, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    assert data["ok"] is (expect == 0), data["findings"]
    return data


# id, profile keys, CLI args, ok, codes that must appear, codes that must not, message fragments
Case = tuple[str, dict[str, Any], tuple[str, ...], bool, set[str], set[str], tuple[str, ...]]
CASES: list[Case] = [
    # §1 "torch 2.7.x" row; fixed: PEP 440 spellings of a published release were E-TORCH-UNKNOWN
    ("torch-2.07.1", {"torch": "2.07.1"}, (), True, set(), {"E-TORCH-UNKNOWN"}, ()),
    ("torch-v2.7.1", {"torch": "v2.7.1"}, (), True, set(), {"E-TORCH-UNKNOWN"}, ()),
    ("torch-2.7.1.0", {"torch": "2.7.1.0"}, (), True, set(), {"E-TORCH-UNKNOWN"}, ()),
    # §1 index pattern cuNNN: a ROCm-looking version on the cuda backend is named as such
    ("cuda-6.3", {"version": "6.3"}, (), False, {"E-VARIANT-UNAVAILABLE"}, set(), ("ROCm version",)),
    # §1 "2.12.x: cu126, cu130, cu132": the error says which releases do have cu128
    (
        "2.12-cu128",
        {"torch": "2.12.0", "version": "12.8"},
        (),
        False,
        {"E-VARIANT-UNAVAILABLE"},
        set(),
        ("2.7.0 to 2.11.0", "12.6, 13.0, 13.2"),
    ),
    # §1 † cu129 absent in 2.12.0, present in 2.12.1 (Linux-only)
    (
        "2.12.0-cu129",
        {"torch": "2.12.0", "version": "12.9"},
        (),
        False,
        {"E-VARIANT-UNAVAILABLE"},
        set(),
        ("only in 2.12.1",),
    ),
    # §1 ROCm "2.7.x: rocm6.2.4, rocm6.3"; fixed: 6.3.0 / 6.3.4 (a ROCm 6.3 point release) were refused
    (
        "rocm-6.3.0",
        {"backend": "rocm", "targets": ["mi300x"], "version": "6.3.0"},
        (),
        True,
        {"I-ACCEL-PATCH"},
        {"E-VARIANT-UNAVAILABLE"},
        (),
    ),
    (
        "rocm-6.3.4",
        {"backend": "rocm", "targets": ["mi300x"], "version": "6.3.4"},
        (),
        True,
        {"I-ACCEL-PATCH"},
        {"E-VARIANT-UNAVAILABLE"},
        (),
    ),
    # §5 torch cu128 = 12.8.1: a 12.8.x accelerator.version keeps the cu128 wheels and says which image
    ("cuda-12.8.0", {"version": "12.8.0"}, (), True, {"I-ACCEL-PATCH"}, set(), ()),
    # §4 card ids; fixed: --target B200 was an unknown target (exit 2)
    ("target-uppercase", {"version": "12.8"}, ("--target", "B200"), True, set(), {"E-ARCH-MISSING"}, ()),
    # §2a "sm_100 first in 2.7 cu128": the error points at the same release's cu128 first
    (
        "b200-cu126",
        {"version": "12.6"},
        ("--target", "b200"),
        False,
        {"E-ARCH-MISSING"},
        set(),
        ('accelerator.version = "12.8"',),
    ),
    # §2a + §4 "B200 need torch >= 2.7 with cu128+"
    (
        "b200-2.6",
        {"torch": "2.6.0", "os": "ubuntu22.04", "python": "3.11"},
        ("--target", "b200"),
        False,
        {"E-ARCH-MISSING"},
        set(),
        ("torch 2.7.0 (cu128) is the first release with sm_100",),
    ),
    # §2b "2.3+rocm5.7 lacks MI300": the fix names rocm6.0 of the same release
    (
        "mi300x-2.3-rocm5.7",
        {
            "torch": "2.3.1",
            "backend": "rocm",
            "targets": ["mi300x"],
            "version": "5.7",
            "os": "ubuntu22.04",
            "python": "3.10",
        },
        (),
        False,
        {"E-ARCH-MISSING", "E-ROCM-TOO-OLD"},
        set(),
        ('accelerator.version = "6.0"',),
    ),
    # §1 Python "2.4.x: 3.8-3.12": choices in version order
    (
        "py313-2.4",
        {"torch": "2.4.1", "python": "3.13", "os": "ubuntu22.04"},
        (),
        False,
        {"E-PYTHON-NO-WHEEL"},
        set(),
        ("3.9, 3.10, 3.11, 3.12",),
    ),
    # §5 nvidia/cuda 13.x tags; decision: 13.2.1 on ubuntu22.04 offered like 13.0.2 (fixed: was an error)
    (
        "2.13-cu132-u22",
        {"torch": "2.13.0", "version": "13.2", "os": "ubuntu22.04", "python": "3.10"},
        (),
        True,
        set(),
        {"E-BASE-UNAVAILABLE"},
        (),
    ),
    # §1 "2.6.0: cu118, cu124, cu126", PyPI default cu124; §5 12.4.1 tags only on ubuntu22.04.
    # fixed: the derived variant kept cu124 on ubuntu24.04 (E-BASE-UNAVAILABLE) although cu126 works
    (
        "2.6-derived-u24",
        {"torch": "2.6.0"},
        (),
        True,
        {"I-VARIANT-DERIVED"},
        {"E-BASE-UNAVAILABLE"},
        ("no nvidia/cuda image for ubuntu24.04",),
    ),
    # §1 "2.7.x: cu118 ..."; §5 11.8.0 tags on ubuntu22.04 only: the plain ubuntu:24.04 image, with the
    # Dockerfile setting NVIDIA_REQUIRE_CUDA (was E-BASE-UNAVAILABLE; nvcc still needs the devel image)
    (
        "2.7-cu118-u24",
        {"version": "11.8"},
        (),
        True,
        {"I-BASE-DERIVED"},
        {"E-BASE-UNAVAILABLE"},
        ("publishes no CUDA 11.8.0 image for ubuntu24.04", "NVIDIA_REQUIRE_CUDA=cuda>=11.8"),
    ),
    # §1 ROCm "2.5.x: rocm6.1, rocm6.2"; §5 rocm/dev-ubuntu-24.04:6.2 tags. fixed: was E-BASE-UNAVAILABLE
    (
        "2.5-rocm-u24",
        {"torch": "2.5.1", "backend": "rocm", "targets": ["mi300x"]},
        (),
        True,
        set(),
        {"E-BASE-UNAVAILABLE", "E-ARCH-MISSING"},
        (),
    ),
    # §4 "B200 ... 180 GB", lot = 2: suggestions name the cards that would hold it
    ("mem-h100-100", {"memory": 100}, (), False, {"E-MEMORY-PER-CARD"}, set(), ("h200 (141 GiB)",)),
    (
        "mem-b200-pool",
        {"memory": 200, "version": "12.8"},
        ("--target", "b200"),
        False,
        {"E-MEMORY-PER-CARD", "I-LOT-IDLE"},
        set(),
        ("Cards do not pool memory", "2 x 180 GiB"),
    ),
    # §1 wheel tags; fixed: wheels whose marker excludes the image were checked anyway
    (
        "wheel-macos-marker",
        {"packages": [f"foo @ {W}foo-1.0-cp312-cp312-macosx_11_0_arm64.whl ; sys_platform == 'darwin'"]},
        (),
        True,
        set(),
        {"E-WHEEL-TAGS"},
        (),
    ),
    (
        "wheel-py311-marker",
        {"packages": [f"foo @ {W}foo-1.0-cp311-cp311-linux_x86_64.whl ; python_version == '3.11'"]},
        (),
        True,
        set(),
        {"E-WHEEL-TAGS"},
        (),
    ),
    (
        "wheel-cp311-on-312",
        {"packages": [f"foo @ {W}foo-1.0-cp311-cp311-linux_x86_64.whl"]},
        (),
        False,
        {"E-WHEEL-TAGS"},
        set(),
        ("cp312-cp312",),
    ),
    (
        "wheel-cp313t",
        {"python": "3.13", "packages": [f"foo @ {W}foo-1.0-cp313-cp313t-manylinux_2_28_x86_64.whl"]},
        (),
        False,
        {"E-WHEEL-TAGS"},
        set(),
        ("cp313-cp313t",),
    ),
    (
        "wheel-abi3",
        {"packages": [f"foo @ {W}foo-1.0-cp39-abi3-manylinux_2_17_x86_64.whl"]},
        (),
        True,
        set(),
        {"E-WHEEL-TAGS"},
        (),
    ),
    # fixed: a wheel of another project behind "name @" passed; pip rejects the name mismatch
    (
        "wheel-name",
        {"packages": [f"bar @ {W}foo-1.0-py3-none-any.whl"]},
        (),
        False,
        {"E-WHEEL-NAME"},
        set(),
        ("'foo'",),
    ),
    # §1 local tag +<variant>; fixed: the exact torch wheel URL was reported as a conflict
    (
        "torch-url-same",
        {
            "version": "12.8",
            "packages": [
                "torch @ https://download.pytorch.org/whl/cu128/torch-2.7.1%2Bcu128-cp312-cp312-manylinux_2_28_x86_64.whl"
            ],
        },
        (),
        True,
        {"I-REQ-SUPERSEDED"},
        {"E-REQ-CONFLICT"},
        (),
    ),
    (
        "torch-url-other",
        {
            "version": "12.8",
            "packages": [
                "torch @ https://download.pytorch.org/whl/cu126/torch-2.7.1%2Bcu126-cp312-cp312-manylinux_2_28_x86_64.whl"
            ],
        },
        (),
        False,
        {"E-REQ-CONFLICT"},
        set(),
        ("2.7.1+cu126", "torch==2.7.1+cu128"),
    ),
    # §1 companions; fixed: a marker-excluded torchvision line was a conflict
    (
        "tv-marker",
        {"packages": ['torchvision==0.10.0 ; python_version < "3.0"']},
        (),
        True,
        set(),
        {"E-REQ-CONFLICT"},
        (),
    ),
    # fixed: "torch" in torch.packages was "not a torch companion"; a contradicting pin is an error
    (
        "torch-in-companions",
        {"companions": ["torch", "torchvision"]},
        (),
        True,
        set(),
        {"E-COMPANION-UNKNOWN"},
        (),
    ),
    (
        "torch-pin-contradicts",
        {"companions": ["torch==2.6.0"]},
        (),
        False,
        {"E-COMPANION-MISMATCH"},
        set(),
        (),
    ),
    # issue 13: torchaudio 2.11.0 declares no torch requirement, so the user's pin is kept next to 2.12
    (
        "torchaudio-2.12-line",
        {"torch": "2.12.0", "packages": ["torchaudio==2.11.0"]},
        (),
        True,
        {"I-COMPANION-DECLARED"},
        {"E-REQ-CONFLICT", "E-COMPANION-UNAVAILABLE"},
        ("declares no torch requirement",),
    ),
    # §7 "installing PyPI triton alongside ROCm torch is wrong"
    (
        "triton-line-rocm",
        {"backend": "rocm", "targets": ["mi300x"], "packages": ["triton==3.3.1"]},
        (),
        False,
        {"E-REQ-CONFLICT"},
        set(),
        ("pytorch-triton-rocm",),
    ),
    # §5 "wheels bundle CUDA runtime/cuDNN via nvidia-* deps": pins from another build (pip freeze) warn
    (
        "nvidia-pin",
        {"version": "12.8", "packages": ["nvidia-cublas-cu12==12.6.4.1", "nvidia-ml-py==12.560.30"]},
        (),
        True,
        {"W-NVIDIA-PIN"},
        set(),
        ("nvidia-cublas-cu12",),
    ),
    (
        "nvidia-cu12-on-cu130",
        {"torch": "2.13.0", "version": "13.0", "packages": ["nvidia-cudnn-cu12"]},
        (),
        True,
        {"W-NVIDIA-PIN"},
        set(),
        ("CUDA 12 wheel",),
    ),
    (
        "nvidia-unpinned-same-major",
        {"version": "12.8", "packages": ["nvidia-cudnn-cu12"]},
        (),
        True,
        set(),
        {"W-NVIDIA-PIN"},
        (),
    ),
    # §3 "Blackwell GPUs additionally need ... CUDA >= 12.8" binds what is built with the toolkit; Blender
    # ships its own kernels (§6), so an old CUDA image is a warning there, an error with torch
    (
        "blender-b200-cuda11.8",
        {
            "kind": "blender",
            "torch": None,
            "blender": "4.5.3",
            "devices": ["OPTIX"],
            "targets": ["b200"],
            "version": "11.8",
            "os": "ubuntu22.04",
            "python": "3.10",
        },
        (),
        True,
        {"W-TOOLKIT-OLD"},
        {"E-TOOLKIT-TOO-OLD"},
        (),
    ),
    (
        "torch-b200-cuda12.6",
        {"version": "12.6", "targets": ["b200"]},
        (),
        False,
        {"E-TOOLKIT-TOO-OLD", "E-ARCH-MISSING"},
        set(),
        ("Set accelerator.version to 12.8",),
    ),
    # §6 "sm_120 added in 4.4"; fixed: Blender 4.0/4.1/4.3/4.4 were unknown series
    (
        "blender-4.4-5090",
        {"kind": "blender", "torch": None, "blender": "4.4.3", "devices": ["CUDA"], "targets": ["rtx5090"]},
        (),
        True,
        {"W-BLENDER-UNCONFIRMED"},
        {"E-BLENDER-UNKNOWN", "W-BLENDER-PTX-JIT"},
        (),
    ),
    (
        "blender-4.3-5090",
        {"kind": "blender", "torch": None, "blender": "4.3.2", "devices": ["CUDA"], "targets": ["rtx5090"]},
        (),
        True,
        {"W-BLENDER-PTX-JIT"},
        {"E-BLENDER-UNKNOWN"},
        (),
    ),
    # §6 HIP filter major >= 9 until 4.5, but no gfx942 kernels in any version
    (
        "blender-4.4-hip-mi300x",
        {
            "kind": "blender",
            "torch": None,
            "blender": "4.4.3",
            "devices": ["HIP"],
            "backend": "rocm",
            "targets": ["mi300x"],
        },
        (),
        False,
        {"E-BLENDER-HIP-UNSUPPORTED"},
        set(),
        (),
    ),
    # fixed: "4.5" rendered blender-4.5-linux-x64.tar.xz, a URL that does not exist; now 4.5.0 + a warning
    (
        "blender-no-patch",
        {"kind": "blender", "torch": None, "blender": "4.5", "devices": ["OPTIX"]},
        (),
        True,
        {"W-BLENDER-PATCH"},
        set(),
        ("4.5.0",),
    ),
]


@pytest.mark.parametrize(
    ("keys", "args", "ok", "must", "must_not", "says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_review_case(
    tmp_path: Path,
    keys: dict[str, Any],
    args: tuple[str, ...],
    ok: bool,
    must: set[str],
    must_not: set[str],
    says: tuple[str, ...],
) -> None:
    data = run_check(write_profile(tmp_path, **keys), *args, expect=0 if ok else 1)
    codes = {f["code"] for f in data["findings"]}
    assert must <= codes, codes
    assert not (must_not & codes), codes
    text = " ".join(f["message"] for f in data["findings"])
    for fragment in says:
        assert fragment in text, text


@pytest.mark.parametrize(
    ("torch", "says"),
    [
        ("2.7.5", ("2.7.0, 2.7.1",)),  # §1: 2.7.x has 2.7.0 and 2.7.1 only; the message names them
        ("2.14.0rc1", ("pre-release", "2.14.0")),  # §1 "Pre-releases: .../whl/test/<variant>": not planned
    ],
)
def test_unknown_torch_is_a_usage_error(tmp_path: Path, torch: str, says: tuple[str, ...]) -> None:
    """A torch.version the user typed that the catalog does not know exits 2, before any plan."""
    result = invoke(["check", str(write_profile(tmp_path, torch=torch)), "--json"])
    assert result.exit_code == 2, result.output
    assert json.loads(result.stdout)["ok"] is False  # --json prints on failure too
    for fragment in ("torch.version", *says):
        assert fragment in result.stderr, result.stderr


def test_json_shape_exact(tmp_path: Path) -> None:
    data = run_check(write_profile(tmp_path, memory=100), expect=1)
    assert set(data) == {"format", "command", "ok", "findings", "plan"}
    assert data["findings"] and all(
        set(f) == {"severity", "code", "message", "source"} for f in data["findings"]
    )
    assert set(data["plan"]["profile"]) == {"name", "path", "sha256"}


def test_blender_optix_5x_raises_the_driver_to_order(tmp_path: Path) -> None:
    # §6 "5.0 / 5.1: OptiX ... driver >= 535"; fixed: the plan said 520.61.05 (CUDA 11.8 image on 22.04)
    keys = {
        "kind": "blender",
        "torch": None,
        "blender": "5.0.1",
        "devices": ["OPTIX"],
        "os": "ubuntu22.04",
        "python": "3.10",
    }
    data = run_check(write_profile(tmp_path, **keys), expect=0)
    assert data["plan"]["min_driver"] == "535"
    (info,) = [f for f in data["findings"] if f["code"] == "I-DRIVER-UNKNOWN"]
    assert "Blender OptiX needs 535" in info["message"]
    keys["blender"] = "4.2.3"  # 4.x: OptiX driver >= 495.89 (manual 4.x), below the toolkit's
    data = run_check(write_profile(tmp_path, **keys), expect=0)
    assert data["plan"]["min_driver"] == "520.61.05"


def test_blender_series_downloads_its_x_y_0_release(tmp_path: Path) -> None:
    # §6 downloads: .../Blender<MAJOR.MINOR>/blender-<X.Y.Z>-linux-x64.tar.xz needs a full version
    data = run_check(
        write_profile(tmp_path, kind="blender", torch=None, blender="4.5", devices=["OPTIX"]), expect=0
    )
    plan = data["plan"]
    assert plan["blender_version"] == "4.5.0"
    assert (
        plan["blender_url"]
        == "https://download.blender.org/release/Blender4.5/blender-4.5.0-linux-x64.tar.xz"
    )
    assert plan["blender_sha256_url"].endswith("/Blender4.5/blender-4.5.0.sha256")


def test_hash_mode_ignores_lines_the_marker_excludes(tmp_path: Path) -> None:
    h = "sha256:" + "a" * 64
    req = tmp_path / "requirements.txt"
    req.write_text(f"numpy==2.2.6 --hash={h}\nfoo==1.0 ; sys_platform == 'win32'\n", encoding="utf-8")
    path = write_profile(
        tmp_path, kind="custom", torch=None, backend="cpu", targets=["cpu"], requirements=["requirements.txt"]
    )  # kind "custom": no torch (a "pytorch" profile without torch.version gets the newest confirmed one)
    data = run_check(path, expect=0)
    (found,) = [f for f in data["findings"] if f["code"] == "I-HASH-MODE"]
    assert "carry none" not in found["message"], found  # the win32-only line needs no hash


def test_requirements_file_from_another_variant(tmp_path: Path) -> None:
    # §1 index URL pattern .../whl/<variant> and local tag +<variant>: a file written for cu118 (a real
    # pattern: --extra-index-url plus +cu118 pins) meets a cu128 plan; a freeze of nvidia-* pins warns
    (tmp_path / "requirements.txt").write_text(
        "--extra-index-url https://download.pytorch.org/whl/cu118\n"
        "-f https://download.pytorch.org/whl/torch_stable.html\n"
        'torch==2.7.1+cu118 ; sys_platform == "linux"\n'
        'torch==2.7.1 ; sys_platform == "darwin"\n'
        "torchvision==0.22.1\n"
        "nvidia-cudnn-cu12==9.5.1.17\n",
        encoding="utf-8",
    )
    path = write_profile(tmp_path, version="12.8", requirements=["requirements.txt"])
    data = run_check(path, expect=1)
    by_code: dict[str, list[str]] = {}
    for f in data["findings"]:
        by_code.setdefault(f["code"], []).append(f["message"])
    assert (
        len(by_code["E-REQ-CONFLICT"]) == 1 and "+cu118" in by_code["E-REQ-CONFLICT"][0]
    )  # darwin line skipped
    assert len(by_code["W-TORCH-INDEX"]) == 1 and "cu118" in by_code["W-TORCH-INDEX"][0]
    assert "W-NVIDIA-PIN" in by_code and "I-REQ-SUPERSEDED" in by_code


# ---- sweeps: compat-facts tables re-typed by hand -------------------------------------------------------

# §1 "Linux CUDA wheels (index)" per patch release, † cu129 per version
CUDA_WHEELS = {
    "2.1.2": "cu118 cu121",
    "2.2.2": "cu118 cu121",
    "2.3.1": "cu118 cu121",
    "2.4.1": "cu118 cu121 cu124",
    "2.5.1": "cu118 cu121 cu124",
    "2.6.0": "cu118 cu124 cu126",
    "2.7.0": "cu118 cu126 cu128",
    "2.7.1": "cu118 cu126 cu128",
    "2.8.0": "cu126 cu128 cu129",
    "2.9.0": "cu126 cu128 cu129 cu130",
    "2.9.1": "cu126 cu128 cu129 cu130",
    "2.10.0": "cu126 cu128 cu129 cu130",
    "2.11.0": "cu126 cu128 cu129 cu130",
    "2.12.0": "cu126 cu130 cu132",
    "2.12.1": "cu126 cu129 cu130 cu132",
    "2.13.0": "cu126 cu129 cu130 cu132",
    "2.14.0": "cu126 cu130 cu132",
}
ALL_CUDA = ("cu118", "cu121", "cu124", "cu126", "cu128", "cu129", "cu130", "cu132")


def _image_os(variant: str) -> tuple[str, str]:
    return ("ubuntu22.04", "3.10") if variant in ("cu118", "cu121", "cu124") else ("ubuntu24.04", "3.12")


@pytest.mark.parametrize("torch", sorted(CUDA_WHEELS))
def test_sweep_cuda_variant_existence(torch: str) -> None:
    for variant in ALL_CUDA:
        os_, py = _image_os(variant)
        version = f"{variant[2:4]}.{variant[4]}"
        result = check(profile(torch=torch, version=version, os=os_, python=py))
        codes = {f.code for f in result.findings}
        published = variant in CUDA_WHEELS[torch].split()
        assert ("E-VARIANT-UNAVAILABLE" not in codes) is published, (torch, variant, codes)
        if published:
            assert result.ok, (torch, variant, result.findings)
            assert any(p.spec == f"torch=={torch}+{variant}" for p in result.plan.pins)


# §2a TORCH_CUDA_ARCH_LIST table (Linux x86_64)
L118, L12 = "3.7;5.0;6.0;7.0;7.5;8.0;8.6;9.0", "5.0;6.0;7.0;7.5;8.0;8.6;9.0"
ARCH = {"cu118": L118, "cu121": L12, "cu124": L12, "cu126": L12}
ARCH_BY_RELEASE = {
    ("2.7.1", "cu128"): "7.5;8.0;8.6;9.0;10.0;12.0+PTX",
    ("2.8.0", "cu128"): "7.0;7.5;8.0;8.6;9.0;10.0;12.0",
    ("2.8.0", "cu129"): "7.0;7.5;8.0;8.6;9.0;10.0;12.0+PTX",
    ("2.10.0", "cu130"): "7.5;8.0;8.6;9.0;10.0;12.0+PTX",
    ("2.11.0", "cu128"): "7.5;8.0;8.6;9.0;10.0;12.0",
    ("2.11.0", "cu130"): "7.5;8.0;8.6;9.0;10.0;12.0",
    ("2.13.0", "cu132"): "7.5;8.0;8.6;9.0;10.0;12.0+PTX",
}
CARDS = {
    "rtx4090": (8, 9),
    "l40s": (8, 9),
    "a100-40gb": (8, 0),
    "h100": (9, 0),
    "h200": (9, 0),
    "b200": (10, 0),
    "rtx5090": (12, 0),
}


def _expected(arch_list: str, cc: tuple[int, int]) -> str:
    cubins = [tuple(int(x) for x in a.removesuffix("+PTX").split(".")) for a in arch_list.split(";")]
    ptx = arch_list.endswith("+PTX") and cubins[-1] <= cc
    if cc in cubins:
        return "native"
    if any(c[0] == cc[0] and c[1] <= cc[1] for c in cubins):  # same-major cubin rule
        return "compat"
    return "ptx" if ptx else "missing"


ARCH_CASES = [
    ((t, v), ARCH_BY_RELEASE.get((t, v)) or ARCH[v])
    for t in ("2.1.2", "2.4.1", "2.6.0", "2.7.1")
    for v in CUDA_WHEELS[t].split()
    if v in ARCH
] + list(ARCH_BY_RELEASE.items())


@pytest.mark.parametrize(("release", "arch_list"), ARCH_CASES, ids=[f"{t}-{v}" for (t, v), _ in ARCH_CASES])
def test_sweep_arch_coverage(release: tuple[str, str], arch_list: str) -> None:
    torch, variant = release
    os_, py = _image_os(variant)
    for card, cc in CARDS.items():
        version = f"{variant[2:4]}.{variant[4]}"
        result = check(profile(torch=torch, version=version, os=os_, python=py, targets=(card,)))
        codes = {f.code for f in result.findings}
        got = (
            "missing"
            if "E-ARCH-MISSING" in codes
            else "ptx"
            if "W-ARCH-PTX-JIT" in codes
            else "compat"
            if "I-ARCH-COMPAT" in codes
            else "native"
        )
        assert got == _expected(arch_list, cc), (torch, variant, card, codes)


# §1 "Python (release wheels)"; 3.12 experimental at 2.2, 3.13 at 2.5 (warnings, not errors)
PYTHON = {
    "2.1.2": (8, 11),
    "2.2.2": (8, 12),
    "2.4.1": (8, 12),
    "2.5.1": (9, 13),
    "2.6.0": (9, 13),
    "2.8.0": (9, 13),
    "2.9.1": (10, 14),
    "2.12.1": (10, 14),
    "2.13.0": (10, 15),
}


@pytest.mark.parametrize("torch", sorted(PYTHON))
def test_sweep_python_wheels(torch: str) -> None:
    low, high = PYTHON[torch]
    for minor in range(7, 17):
        result = check(profile(torch=torch, python=f"3.{minor}", backend="cpu", targets=()))
        codes = {f.code for f in result.findings}
        assert ("E-PYTHON-NO-WHEEL" not in codes) is (low <= minor <= high), (torch, minor, codes)
