"""Which compiler the builder stage uses, and the Dockerfile that installs CUDA 13's from the package
index (issue 35 item 1): the plan (``base.builder``, I-BUILDER-TOOLKIT-WHEELS), the profile key's checks,
and the rendered builder and final stages.  The lock is tested in tests/test_toolkit_lock.py, a real
compile in tests/test_toolkit_compile.py.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from cli_support import envbuild, environ
from plan_support import profile

from envbuild.errors import ProfileError
from envbuild.models import CheckResult, Profile
from envbuild.plan import check
from envbuild.profile import load_profile
from envbuild.render import render_files

CUDA13: dict[str, Any] = {"torch": "2.14.1", "version": "13.0"}
DEBIAN: dict[str, Any] = {"os": "debian12", "python": "3.11"}
TOOLKIT_IN_BUILDER = "/opt/envbuild-cuda"  # the builder's own prefix (envbuild.models.TOOLKIT_IN_BUILDER)


def _with_builder(prof: Profile, builder: str) -> Profile:
    return replace(prof, base=replace(prof.base, builder=builder))  # type: ignore[arg-type]


def _messages(result: CheckResult, code: str) -> list[str]:
    return [f.message for f in result.findings if f.code == code]


def _dockerfile(prof: Profile) -> str:
    files, _ = render_files(check(prof), "envbuild render")
    return bytes(files["Dockerfile"]).decode()  # type: ignore[arg-type]


def test_a_debian12_cuda13_plan_builds_the_cuda_op_with_the_package_indexs_nvcc() -> None:
    result = check(profile(**CUDA13, **DEBIAN))
    plan = result.plan
    assert result.ok, result.findings
    assert plan.probe_ops == ("cpp", "cuda") and plan.builder_image is None
    assert (plan.base_image, plan.builder_toolkit) == ("debian:12", "13.0.3")  # the catalog's, before lock
    (info,) = _messages(result, "I-BUILDER-TOOLKIT-WHEELS")
    assert "cuda-toolkit[nvcc,cccl]==13.0.3 (the release torch's cu130 builds require" in info
    assert "`envbuild lock` pins the one the resolved torch requires" in info
    assert f"installed into {TOOLKIT_IN_BUILDER}" in info and "no nvidia/cuda devel image is pulled" in info
    assert 'base.builder = "devel-image"' in info
    assert not _messages(result, "I-PROBE-OPS-CPU-ONLY") and not _messages(result, "I-BUILDER-DERIVED")


def test_every_os_gets_the_wheels_for_cuda13() -> None:
    plan = check(profile(**CUDA13)).plan  # Ubuntu 24.04, where a devel image exists too
    assert plan.builder_image is None and plan.builder_toolkit == "13.0.3"
    assert plan.probe_ops == ("cpp", "cuda")


def test_a_cu128_plan_keeps_the_devel_builder_and_says_why() -> None:
    result = check(profile(version="12.8"))
    assert result.plan.builder_image == "nvidia/cuda:12.8.1-devel-ubuntu24.04"
    assert result.plan.builder_toolkit is None
    (info,) = _messages(result, "I-BUILDER-DERIVED")
    assert "CUDA 12.8's compiler wheels keep each component in its own folder" in info
    assert not _messages(result, "I-BUILDER-TOOLKIT-WHEELS")


def test_the_option_forces_the_devel_builder() -> None:
    result = check(_with_builder(profile(**CUDA13), "devel-image"))
    assert result.plan.builder_image == "nvidia/cuda:13.0.2-devel-ubuntu24.04"
    assert result.plan.builder_toolkit is None and result.plan.probe_ops == ("cpp", "cuda")
    (info,) = _messages(result, "I-BUILDER-DERIVED")
    assert 'base.builder = "devel-image" asks for it' in info
    assert "requirements-toolkit.txt" not in _dockerfile(_with_builder(profile(**CUDA13), "devel-image"))


def test_the_forced_devel_builder_on_debian12_builds_the_cpp_op_only_naming_both_ways_out() -> None:
    result = check(_with_builder(profile(**CUDA13, **DEBIAN), "devel-image"))
    assert result.ok and result.plan.probe_ops == ("cpp",) and result.plan.builder_toolkit is None
    (info,) = _messages(result, "I-PROBE-OPS-CPU-ONLY")
    assert "no CUDA 13.0.2 devel image for debian12" in info
    assert "base.os = one of ubuntu22.04, ubuntu24.04" in info and 'base.builder = "auto"' in info


def _write(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "p.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_bad_value_of_the_option_is_refused_naming_the_key_and_the_choices(tmp_path: Path) -> None:
    path = _write(tmp_path, 'name = "x"\nextends = "pytorch"\n[base]\nbuilder = "devel"\n')
    with pytest.raises(ProfileError) as raised:
        load_profile(str(path))
    text = str(raised.value)
    assert "base.builder" in text and "'devel' is not a valid base.builder" in text, text
    assert "did you mean 'devel-image'" in text and "valid: auto, devel-image" in text, text
    proc = envbuild("check", path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "base.builder" in proc.stderr


def test_the_option_is_read_from_a_profile(tmp_path: Path) -> None:
    path = _write(tmp_path, 'name = "x"\nextends = "pytorch"\n[base]\nbuilder = "devel-image"\n')
    assert load_profile(str(path)).base.builder == "devel-image"
    assert load_profile("pytorch").base.builder == "auto"


# ---- the Dockerfile ---------------------------------------------------------------------------------


def _stages(dockerfile: str) -> tuple[str, str]:
    """(the builder stage, the final stage)."""
    builder = dockerfile.split(" AS builder\n", 1)[1].split("\nFROM ", 1)[0]
    final = dockerfile.split("# ---- final:", 1)[1]
    return builder, final


@pytest.fixture(scope="module")
def debian_dockerfile() -> str:
    return _dockerfile(profile(**CUDA13, **DEBIAN))


def test_the_builder_installs_the_toolkit_into_its_own_prefix(debian_dockerfile: str) -> None:
    builder, _ = _stages(debian_dockerfile)
    assert (
        "ARG BUILDER_IMAGE" not in debian_dockerfile and "FROM ${BASE_IMAGE} AS builder" in debian_dockerfile
    )
    assert "COPY requirements-toolkit.txt /tmp/envbuild/requirements-toolkit.txt" in builder
    step = builder.split("requirements-toolkit.txt\n", 1)[1].split(" --version\n", 1)[0]
    assert step.startswith("RUN ") and step.endswith(f"{TOOLKIT_IN_BUILDER}/nvidia/cu13/bin/nvcc"), step
    assert "pip install --no-cache-dir --no-deps --require-hashes" in step
    assert "set -- --no-index --find-links /tmp/envbuild/wheelhouse" in step
    assert f"--target {TOOLKIT_IN_BUILDER} -r /tmp/envbuild/requirements-toolkit.txt" in step
    assert f"echo 'INPUT(libcudart.so.13)' > {TOOLKIT_IN_BUILDER}/link/libcudart.so" in step
    assert "/opt/venv " not in step.replace("/opt/venv/bin/python -m pip", "")  # never into the venv
    # the venv's install comes first (pip is the venv's), the probe op after
    assert (
        builder.index("python3.11 -m venv /opt/venv")
        < builder.index(step)
        < builder.index("probe-ops.py build")
    )


def test_the_toolkit_variables_are_set_on_the_probe_op_run_line_only(debian_dockerfile: str) -> None:
    builder, final = _stages(debian_dockerfile)
    home = f"{TOOLKIT_IN_BUILDER}/nvidia/cu13"
    (run,) = [line for line in builder.splitlines() if "envbuild-probe-ops.py build" in line]
    assert run.startswith(
        f'RUN CUDA_HOME={home} PATH="{home}/bin:$PATH" LIBRARY_PATH={TOOLKIT_IN_BUILDER}/link:{home}/lib '
        "CPATH=/opt/venv/lib/python3.11/site-packages/nvidia/cu13/include TORCH_CUDA_ARCH_LIST=9.0+PTX "
    )
    assert run.endswith("--gpu cuda --require-gpu")
    assert debian_dockerfile.count("CUDA_HOME=") == 1  # no source build: this RUN line only
    assert "ENV CUDA_HOME" not in debian_dockerfile and "ARG CUDA_HOME" not in debian_dockerfile
    # the final stage: no trace of the prefix, the file or the variables
    for trace in (TOOLKIT_IN_BUILDER, "requirements-toolkit", "CUDA_HOME", "LIBRARY_PATH", "CPATH", "nvcc"):
        assert trace not in final, trace
    copies = re.findall(r"^COPY --from=builder (\S+)", final, re.M)
    assert copies == ["/opt/venv", "/opt/envbuild", "/opt/envbuild-probe-ops"], copies


def test_no_toolkit_step_without_cuda13_or_without_gpu_code() -> None:
    for prof in (
        profile(version="12.8"),  # the devel image
        profile(**CUDA13, probe_ops=False),  # nothing compiled for the GPU
        profile(backend="cpu", targets=(), **DEBIAN, torch="2.13.0"),
    ):
        assert (
            "requirements-toolkit.txt" not in _dockerfile(prof) and check(prof).plan.builder_toolkit is None
        )


def test_check_names_the_builder(tmp_path: Path) -> None:
    text = 'name = "x"\nextends = "pytorch"\n[base]\nos = "debian12"\n[python]\nversion = "3.11"\n'
    path = _write(tmp_path, text)
    proc = envbuild("check", path, env=environ(COLUMNS="300"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows: dict[str, Any] = {}
    for line in proc.stdout.splitlines():
        key, _, value = line.partition("  ")
        rows.setdefault(key.strip(), value.strip())
    assert rows["builder"] == "the base image, with cuda-toolkit[nvcc,cccl]==13.0.3 from the package index"
    assert "I-BUILDER-TOOLKIT-WHEELS" in proc.stdout


def test_a_source_build_with_the_toolkit_lints_clean_and_sets_the_variables_on_its_run_line() -> None:
    from render_support import hadolint

    base = profile(**CUDA13, **DEBIAN)
    text = _dockerfile(replace(base, python=replace(base.python, build_from_source=("flash-attn",))))
    assert hadolint(text) == []
    builder, final = _stages(text)
    (run,) = [line for line in builder.splitlines() if line.startswith("RUN export MAX_JOBS=")]
    home = f"{TOOLKIT_IN_BUILDER}/nvidia/cu13"
    assert f' CUDA_HOME={home} PATH="{home}/bin:$PATH" ' in run
    assert text.count("CUDA_HOME=") == 2 and "CUDA_HOME" not in final  # the op's and the build's RUN lines
    assert builder.index("requirements-toolkit.txt") < builder.index(run)
