"""The validator's probe ops built with the image (issue 27 item 5): what the plan, the Dockerfile and
the lock say, and how validate judges the image's ops folder.

The ops are compiled for real in the docker lane (tests/test_e2e.py: the pytorch-cpu image, validated
inside with no compiler; tests/structure/pytorch-cpu.yaml).  Here the folder's manifests are written
by hand (said where) to reach each way the image's folder can be wrong without building anything; the
CUDA/HIP op's build can only be rendered here (no devel image, no nvcc on these machines).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from plan_support import profile

from envbuild.models import PROBE_OPS_IN_IMAGE
from envbuild.plan import check
from envbuild.render import render_files
from envbuild.render.lockfile import make_lock
from envbuild.validate.probe import PROBES_DIR, run_probe


def _dockerfile(**kwargs: Any) -> str:
    files, _ = render_files(check(profile(**kwargs)), "envbuild render")
    return bytes(files["Dockerfile"]).decode()  # type: ignore[arg-type]


def test_cuda_ops_compile_on_the_devel_builder_and_the_final_stage_stays_on_base() -> None:
    result = check(profile(version="12.8", targets=("h100", "rtx4090")))
    plan = result.plan
    assert plan.probe_ops == ("cpp", "cuda") and not plan.compiles
    assert plan.base_image == "nvidia/cuda:12.8.1-base-ubuntu24.04"
    assert plan.builder_image == "nvidia/cuda:12.8.1-devel-ubuntu24.04"
    assert not {"g++", "ninja-build", "python3-dev"} & set(plan.apt)  # the final stage's packages
    (info,) = [f.message for f in result.findings if f.code == "I-BUILDER-DERIVED"]
    assert "the validator's CUDA probe op is compiled there" in info
    dockerfile = _dockerfile(version="12.8", targets=("h100", "rtx4090"))
    run = next(line for line in dockerfile.splitlines() if "envbuild-probe-ops.py build" in line)
    # the ordered cards' archs only; nvcc must be there (the devel image): a missing one fails the build
    # (with the newest one's PTX, which a newer card than the one ordered JIT-compiles)
    assert run.startswith("RUN TORCH_CUDA_ARCH_LIST='8.9;9.0+PTX' /opt/venv/bin/python")
    assert run.endswith(f"build {PROBE_OPS_IN_IMAGE} --gpu cuda --require-gpu")
    final = dockerfile.split("# ---- final:", 1)[1]
    assert f"COPY --from=builder {PROBE_OPS_IN_IMAGE} {PROBE_OPS_IN_IMAGE}" in final
    assert "g++" not in final and "ninja-build" not in final


def test_without_a_devel_image_for_the_os_only_the_cpp_op_is_built() -> None:
    result = check(profile(version="12.8", os="debian12", python="3.11"))
    assert result.ok, result.findings
    assert result.plan.probe_ops == ("cpp",) and result.plan.builder_image is None
    (info,) = [f.message for f in result.findings if f.code == "I-PROBE-OPS-CPU-ONLY"]
    assert "no CUDA 12.8" in info and "devel image for debian12" in info and "base.os = one of" in info


def test_with_no_cards_ordered_the_cuda_op_is_built_for_every_arch_the_torch_build_carries() -> None:
    """No targets gave the build no TORCH_CUDA_ARCH_LIST; on a build machine without a GPU torch's
    _get_cuda_arch_flags then raises IndexError and the image build fails."""
    plan = check(profile(version="12.8", targets=())).plan
    dockerfile = _dockerfile(version="12.8", targets=())
    run = next(line for line in dockerfile.splitlines() if "envbuild-probe-ops.py build" in line)
    wheel = ";".join(
        f"{a[3:-1]}.{a[-1]}" if "+" not in a else f"{a[3:-5]}.{a[-5]}+PTX" for a in plan.torch_arch_list
    )
    assert plan.torch_arch_list and wheel.endswith("+PTX")
    assert run.startswith(f"RUN TORCH_CUDA_ARCH_LIST='{wheel}' /opt/venv/bin/python")


def test_with_no_cards_ordered_the_hip_op_is_built_for_the_torch_builds_gfx_list() -> None:
    plan = check(profile(backend="rocm", targets=())).plan
    dockerfile = _dockerfile(backend="rocm", targets=())
    run = next(line for line in dockerfile.splitlines() if "envbuild-probe-ops.py build" in line)
    assert plan.torch_arch_list
    assert run.startswith(f"RUN PYTORCH_ROCM_ARCH='{';'.join(plan.torch_arch_list)}' /opt/venv/bin/python")


def test_a_gpu_source_build_with_no_cards_ordered_is_refused_naming_the_key() -> None:
    from dataclasses import replace

    base = profile(version="12.8", targets=())
    result = check(replace(base, python=replace(base.python, build_from_source=("flash-attn",))))
    (message,) = [f.message for f in result.findings if f.code == "E-SOURCE-NO-TARGETS"]
    assert "accelerator.targets is empty" in message and "flash-attn" in message
    assert not result.ok


def test_rocm_ops_compile_on_the_complete_image() -> None:
    plan = check(profile(backend="rocm", targets=("mi300x",))).plan
    assert plan.probe_ops == ("cpp", "rocm") and plan.base_flavor == "rocm-dev"
    assert plan.builder_image is not None and plan.builder_image.endswith("-complete")


def test_an_explicit_base_image_builds_the_gpu_op_only_where_nvcc_is_found() -> None:
    dockerfile = _dockerfile(version="12.8", image="registry.example/cuda:custom")
    run = next(line for line in dockerfile.splitlines() if "envbuild-probe-ops.py build" in line)
    assert run.endswith("--gpu cuda")  # not --require-gpu: the manifest records a skip instead


def test_probe_ops_off_builds_nothing_and_compile_extensions_keeps_the_toolchain() -> None:
    off = check(profile(version="12.8", probe_ops=False)).plan
    assert off.probe_ops == () and off.builder_image is None
    files, _ = render_files(check(profile(version="12.8", probe_ops=False)), "envbuild render")
    assert "envbuild-probe-ops.py" not in files and "probe-ops" not in bytes(files["Dockerfile"]).decode()  # type: ignore[arg-type]
    both = check(profile(version="12.8", compile_extensions=True)).plan
    assert both.compiles and both.base_flavor == "cuda-devel" and both.builder_image is None
    assert both.probe_ops == ("cpp", "cuda")  # built with the image, and compiled on arrival too


def test_torch_compile_keeps_a_c_compiler_in_the_final_image_only() -> None:
    plan = check(profile(backend="cpu", targets=(), os="debian12", python="3.11", torch_compile=True)).plan
    assert {"g++", "python3-dev"} <= set(plan.apt) and "ninja-build" not in plan.apt
    assert not plan.compiles
    lock = make_lock(plan)
    assert lock.torch_compile and lock.probe_ops == ("cpp",) and lock.probe_ops_dir == PROBE_OPS_IN_IMAGE


def test_no_torch_no_ops() -> None:
    plan = check(profile(kind="ubuntu", torch=None, backend="cpu", targets=())).plan
    assert plan.probe_ops == ()


# ---- validate against the image's folder (manifests written by hand below) -----------------------


def _manifest(folder: Path, **update: Any) -> Path:
    """A hand-written ops.json with this venv's torch; ``update`` breaks it one way."""
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    op = folder / "envbuild_probe_cpp_image.so"
    op.write_bytes(b"not a module")  # never imported: every case below stops before
    data = {
        "format": "envbuild.probe-ops/1",
        "torch": torch.__version__,
        "torch_git": str(torch.version.git_version),
        "ops": {"cpp": {"file": op.name, "sha256": "0" * 64, "compiler": "c++"}},
        **update,
    }
    (folder / "ops.json").write_text(json.dumps(data))
    return folder


def _parts(folder: Path, **args: Any) -> dict[str, dict[str, Any]]:
    base = {"backend": "cpu", "compile": False, "ops": ["cpp"], "ops_dir": str(folder), "extensions": []}
    result = run_probe(sys.executable, "extensions", {**base, **args}, 300)
    assert result.outcome == "ok", result.stderr_tail
    return {p["name"]: p for p in result.data["parts"]}


@pytest.fixture(scope="module")
def ops_module() -> Any:
    sys.path.insert(0, str(PROBES_DIR))
    try:
        import _probe_ops

        yield _probe_ops
    finally:
        sys.path.remove(str(PROBES_DIR))


def test_a_venv_changed_after_the_build_names_both_torch_versions(tmp_path: Path, ops_module: Any) -> None:
    folder = _manifest(tmp_path / "ops", torch="2.12.0+cpu")
    manifest = ops_module.read_manifest(str(folder))
    with pytest.raises(ops_module.NotUsable, match=r"built against torch 2\.12\.0\+cpu, .* has torch 2\.13"):
        ops_module.load_prebuilt(str(folder), manifest, "cpp")


def test_a_module_whose_bytes_changed_is_not_loaded(tmp_path: Path, ops_module: Any) -> None:
    folder = _manifest(tmp_path / "ops")
    manifest = ops_module.read_manifest(str(folder))
    with pytest.raises(
        ops_module.NotUsable, match=r"sha256 [0-9a-f]{64} is not the 0{64} the build recorded"
    ):
        ops_module.load_prebuilt(str(folder), manifest, "cpp")


def _evil(tmp_path: Path) -> tuple[Path, Path, str]:
    """A module outside the ops folder that leaves a mark when it is imported; (module, mark, sha256)."""
    mark = tmp_path / "imported"
    evil = tmp_path / "elsewhere" / "evil.py"
    evil.parent.mkdir()
    evil.write_text(f"open({str(mark)!r}, 'w').close()\n", encoding="utf-8")
    return evil, mark, hashlib.sha256(evil.read_bytes()).hexdigest()


@pytest.mark.parametrize("how", ["dot-dot", "absolute", "symlink"])
def test_a_manifest_entry_outside_its_folder_is_refused(tmp_path: Path, ops_module: Any, how: str) -> None:
    """Issue 36, finding 5: ``"file": "../elsewhere/evil.py"`` with that file's sha256 was imported and
    run by load_prebuilt; so would an absolute path, or a link in the folder pointing out of it."""
    evil, mark, digest = _evil(tmp_path)
    folder = tmp_path / "ops"
    name = {
        "dot-dot": "../elsewhere/evil.py",
        "absolute": str(evil),
        "symlink": "envbuild_probe_cpp_image.so",
    }
    _manifest(folder, ops={"cpp": {"file": name[how], "sha256": digest, "compiler": "c++"}})
    if how == "symlink":
        (folder / name[how]).unlink()
        (folder / name[how]).symlink_to(evil)
    manifest = ops_module.read_manifest(str(folder))
    why = "resolves to .*evil.py, outside" if how == "symlink" else "is not a file name in"
    with pytest.raises(ops_module.NotUsable, match=rf"ops\.json: ops\.cpp\.file '[^']+' {why}"):
        ops_module.load_prebuilt(str(folder), manifest, "cpp")
    assert not mark.exists()


def test_a_manifest_that_is_not_ours_is_refused(tmp_path: Path, ops_module: Any) -> None:
    folder = _manifest(tmp_path / "ops", format="something/9")
    with pytest.raises(ops_module.NotUsable, match="not an envbuild probe-ops manifest"):
        ops_module.read_manifest(str(folder))
    assert ops_module.read_manifest(str(tmp_path / "absent")) is None  # outside the image


@pytest.mark.slow
def test_the_probe_reports_each_case_as_a_part(tmp_path: Path) -> None:
    """One probe process per case: a failed part with the reason and the rebuild hint; an op the builder
    had no compiler for is skipped, not failed."""
    changed = _parts(_manifest(tmp_path / "a", torch="2.12.0+cpu"))["cpp_op"]
    assert changed["status"] == "failed" and "venv changed after the image was built" in changed["error"]
    assert changed["hint"] == "rebuild the image from its bundle (envbuild build)"
    no_nvcc = {"cuda": {"skipped": "nvcc is not in the builder stage's image"}}
    folder = _manifest(tmp_path / "b", ops={"cpp": {}, **no_nvcc})
    parts = _parts(folder, backend="cuda", ops=["cuda"])  # the CUDA op alone (this machine has no GPU)
    assert parts["cuda_op"]["status"] == "skipped" and "nvcc is not in" in parts["cuda_op"]["reason"]


# ---- validate.torch_compile: a small torch.compile on arrival, for real --------------------------


@pytest.mark.slow
def test_torch_compile_runs_through_inductor_and_its_numbers_are_checked(tmp_path: Path) -> None:
    """Inductor's C++ path on the CPU, with this machine's g++; its cache under the run's cache folder."""
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    parts = _parts(tmp_path / "absent", ops=[], torch_compile=True, cache_dir=str(cache))
    part = parts["torch_compile"]
    assert part["status"] == "passed" and part["device"] == "cpu", part
    assert part["max_error"] <= part["tolerance"] == 1e-5
    assert any((cache / "inductor").iterdir())  # the next run on this machine reuses it


@pytest.mark.slow
def test_torch_compile_without_a_compiler_fails_naming_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))  # Inductor compiles with $CXX
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))  # nothing cached to reuse
    part = _parts(tmp_path / "absent", ops=[], torch_compile=True)["torch_compile"]
    assert part["status"] == "failed" and part["error"].startswith("torch.compile failed:"), part
    assert "validate.torch_compile = true keeps g++" in part["hint"]


def test_the_cuda_ops_kernel_file_includes_cudas_runtime_header_only(ops_module: Any) -> None:
    """nvcc parses the ``.cu`` once per arch: with torch's headers that took 328-517 s in the CUDA lane
    (tests/test_e2e_cuda.py), kernel-only it takes seconds (bench/probe_op_compile.py).  The tensor side
    (checks, device guard, torch's current stream, the launch check, the binding) is the host compiler's."""
    sources = ops_module.op_sources("cuda")
    kernel, host = sources["cuda_sources"], sources["cpp_sources"]
    assert re.findall(r"^#include\s*(\S+)", kernel, re.M) == ["<cuda_runtime.h>", "<cstdint>"]
    assert sources["no_implicit_headers"] is True  # this torch's load_inline adds no <torch/types.h> to it
    assert "__global__" in kernel and "<<<" in kernel and "torch" not in kernel
    assert "<<<" not in host and "__global__" not in host
    for needed in ("c10::cuda::CUDAGuard guard(x.device())", "c10::cuda::getCurrentCUDAStream()"):
        assert needed in host
    assert host.index("axpb_launch(xc.") < host.index("C10_CUDA_CHECK(cudaGetLastError());")
    (declared,) = re.findall(r"^void axpb_launch\([^)]*\);$", host, re.M)  # as the .cu defines it
    assert declared[:-1] + " {" in kernel
