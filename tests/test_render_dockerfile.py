"""The rendered Dockerfile against the contract in docs/architecture.md, and its quoting."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import dockerfile
import pytest
from render_support import BLENDER, cpu_plan, cuda_plan, profile, req, rocm_plan

from envbuild.errors import BundleError
from envbuild.render import render_dockerfile
from envbuild.render.quote import docker_str, md, md_code


def stages(text: str) -> list[list[tuple[str, str]]]:
    """The parsed instructions, split into stages at each FROM (the CA-selection stages left out)."""
    out: list[list[tuple[str, str]]] = []
    for command in dockerfile.parse_string(text):
        if command.cmd == "FROM":
            out.append([])
        if out:
            out[-1].append((command.cmd, " ".join(command.value)))
    return [s for s in out if not s[0][1].endswith(CA_STAGES)]


CA_STAGES = ("AS envbuild-ca", "AS envbuild-no-ca", "AS envbuild-final-ca")


def test_contract_layout() -> None:
    text = render_dockerfile(cuda_plan())
    first = dockerfile.parse_string(text)[0]
    assert (first.cmd, first.value) == ("ARG", ('BASE_IMAGE="nvidia/cuda:12.8.1-base-ubuntu24.04"',))
    builder, final = stages(text)
    assert builder[0] == ("FROM", "${BASE_IMAGE} AS builder")
    assert final[0] == ("FROM", "${BASE_IMAGE}")
    b = dict(builder)
    assert "COPY" in b
    builder_copies = [v for c, v in builder if c == "COPY"]
    assert builder_copies == [
        "certs/ /usr/local/share/ca-certificates/envbuild/",
        "requirements-rebuild.txt /tmp/envbuild/requirements-rebuild.txt",
        "wheelhouse/ /tmp/envbuild/wheelhouse/",
        "tools/ /tmp/envbuild/tools/",
    ]
    final_copies = [v for c, v in final if c == "COPY"]
    # the final stage trusts the --ca-cert certificates only with FINAL_CA=envbuild-ca (--keep-ca-cert)
    assert "ARG FINAL_CA=envbuild-no-ca\n" in text and "FROM ${FINAL_CA} AS envbuild-final-ca\n" in text
    assert "\nCOPY --from=envbuild-final-ca /envbuild/certs/ " in text.split("\nFROM ${BASE_IMAGE}\n")[1]
    assert final_copies == [
        "/envbuild/certs/ /usr/local/share/ca-certificates/envbuild/",
        "/opt/venv /opt/venv",
        "/opt/envbuild /opt/envbuild",
        "envbuild.lock.json /etc/envbuild/envbuild.lock.json",
        "app/ /workspace/",
    ]
    assert final[-3:] == [("USER", "envbuild"), ("COPY", "app/ /workspace/"), ("CMD", "/bin/bash")]
    assert ("WORKDIR", "/workspace") in final
    # no wheel file, wheelhouse or pip cache reaches the final stage
    assert not any("wheelhouse" in v or "tools/" in v for _, v in final)
    assert "--mount" not in text and "<<" not in text and "# syntax=" not in text


def test_a_locked_requirements_file_installs_without_resolving() -> None:
    text = render_dockerfile(cuda_plan())
    assert (
        "if grep -qx -- '--require-hashes' /tmp/envbuild/requirements-rebuild.txt; then set -- --no-deps"
        in text
    )
    assert text.count('"$@"') == 2  # both the offline and the index install get --no-deps when locked


def test_install_offline_when_the_wheelhouse_has_wheels() -> None:
    text = render_dockerfile(cuda_plan())
    assert "-name '*.whl'" in text
    assert (
        '--no-index "$@" \\\n        --find-links /tmp/envbuild/wheelhouse'
        " -r /tmp/envbuild/requirements-rebuild.txt" in text
    )
    for line in text.splitlines():
        if "pip install" in line:
            assert "--no-cache-dir" in line
    assert "python3.12 -m venv /opt/venv" in text
    # the validator's venv: only from tools/requirements.txt, hash-checked, offline, nothing resolved
    assert "if [ -f /tmp/envbuild/tools/requirements.txt ]" in text
    assert (
        "/opt/envbuild/bin/python -m pip install --no-cache-dir --no-index --no-deps --require-hashes \\\n"
        "        --find-links /tmp/envbuild/tools -r /tmp/envbuild/tools/requirements.txt" in text
    )


def test_apt_layers_clean_up_and_skip_recommends() -> None:
    text = render_dockerfile(cuda_plan(apt=("git", "curl=7.88.1-10+deb12u8")))
    runs = [c for c in dockerfile.parse_string(text) if c.cmd == "RUN" and "apt-get install" in c.value[0]]
    assert len(runs) == 2
    for run in runs:
        assert "--no-install-recommends" in run.value[0]
        # the apt step removes its indexes and the files that differ from build to build (rebuild --verify)
        removed = run.value[0].split("rm -rf ", 1)[1].split()
        assert {"/var/lib/apt/lists/*", "/var/cache/ldconfig/aux-cache", "/var/log/dpkg.log"} <= set(removed)
    assert "curl=7.88.1-10+deb12u8 " in text and "python3.12-venv" in text and "ca-certificates" in text


def test_source_date_epoch_in_every_stage() -> None:
    text = render_dockerfile(cuda_plan())
    stages = [s for s in text.split("\nFROM ")[1:] if not s.split("\n")[0].endswith(CA_STAGES)]
    assert stages and all("ARG SOURCE_DATE_EPOCH=315532800\n" in stage for stage in stages)


def test_labels_and_env() -> None:
    plan = cuda_plan(profile=profile(env={"B": "2", "A": 'x $HOME "q" \\ y'}, description="A | B"))
    text = render_dockerfile(plan)
    assert '    A="x \\$HOME \\"q\\" \\\\ y" \\\n    B="2"\n' in text
    assert 'org.envbuild.profile-sha256="' + plan.profile.sha256 + '"' in text
    assert 'org.envbuild.version="0.1.0"' in text and 'org.envbuild.profile="train"' in text
    assert 'org.opencontainers.image.description="A | B"' in text
    assert 'NVIDIA_DRIVER_CAPABILITIES="compute,utility"' in text
    assert "NVIDIA_REQUIRE_CUDA" not in text  # NVIDIA's base image sets it


def test_plain_os_base_sets_nvidia_require_cuda() -> None:
    """Where no NVIDIA image sets it (debian12, Blender), the Dockerfile does, from the plan's CUDA."""
    text = render_dockerfile(cuda_plan(base_image="debian:12", base_flavor="os", accelerator_version="12.6"))
    *_, final = stages(text)
    env = next(v for c, v in final if c == "ENV" and v.startswith("PATH "))
    assert 'NVIDIA_REQUIRE_CUDA "cuda>=12.6"' in env and 'NVIDIA_VISIBLE_DEVICES "all"' in env


def test_deadsnakes_and_rocm() -> None:
    text = render_dockerfile(rocm_plan())
    assert 'ARG BASE_IMAGE="rocm/dev-ubuntu-22.04:6.3"' in text
    assert "add-apt-repository -y ppa:deadsnakes/ppa" in text
    assert "python3.12-dev" in text and "python3.12-venv" in text
    assert "--groups video envbuild" in text
    assert "NVIDIA_" not in text


def test_cpu_has_no_gpu_settings() -> None:
    text = render_dockerfile(cpu_plan())
    assert "NVIDIA_" not in text and "--groups" not in text and "deadsnakes" not in text
    assert "python3.11 -m venv" in text


def test_compiles_adds_python_headers() -> None:
    assert "python3.12-dev" not in render_dockerfile(cuda_plan())
    assert "python3.12-dev" in render_dockerfile(cuda_plan(compiles=True))


def test_blender_is_verified_before_extracting() -> None:
    text = render_dockerfile(cuda_plan(**BLENDER))
    blender, _builder, final = stages(text)
    assert blender[0] == ("FROM", "${BASE_IMAGE} AS blender")
    run = next(v for c, v in blender if c == "RUN" and "curl -fsSL" in v)
    verify = run.index("| sha256sum -c -")
    assert verify < run.index("tar -xJf blender-4.5.3-linux-x64.tar.xz")
    assert "grep -E '[ *]blender-4\\.5\\.3-linux-x64\\.tar\\.xz$' blender-4.5.3.sha256" in run
    assert ("COPY", "/opt/blender /opt/blender") in final
    assert 'NVIDIA_DRIVER_CAPABILITIES="compute,utility,graphics"' in text


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"apt": ("git; rm -rf /",)}, "invalid Debian package"),
        ({"apt": ("git\nRUN evil",)}, "invalid Debian package"),
        ({"python_version": "3.12; rm"}, "expected 3.N"),
        ({"base_image": "ubuntu\nRUN x"}, "not an image reference"),
        ({"base_image": "ubuntu:24.04 AS x"}, "not an image reference"),
        ({"python_provision": "conda"}, "cannot provision Python 3.12 on ubuntu24.04"),
        ({"profile": profile(env={"X": "a\nRUN evil"})}, "control character"),
        ({"profile": profile(env={"GITHUB_TOKEN": "x"})}, "looks like a secret"),
        ({**BLENDER, "blender_url": "http://download.blender.org/x/blender.tar.xz"}, "must be https"),
        ({**BLENDER, "blender_url": "https://x.org/a;b.tar.xz"}, "unexpected download file name"),
    ],
)
def test_hostile_values_never_reach_the_dockerfile(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(BundleError, match=message):
        render_dockerfile(cuda_plan(**overrides))


def test_requirements_do_not_reach_the_dockerfile() -> None:
    text = render_dockerfile(cuda_plan(requirements=(req("evil==1.0", "x:1", name="evil"),)))
    assert "evil" not in text


def test_quote_helpers() -> None:
    assert docker_str("a$b", "t") == '"a\\$b"'
    assert md("a|b*c", "t") == "a\\|b\\*c"
    assert md_code("a`b", "t") == "``a`b``"
    assert md_code("x|y", "t") == "`x\\|y`"
    with pytest.raises(BundleError):
        md("a\nb", "t")


def test_same_plan_same_text() -> None:
    assert render_dockerfile(rocm_plan()) == render_dockerfile(rocm_plan())
    assert re.search(r"\n\n\n", render_dockerfile(rocm_plan())) is None


def test_final_stage_installs_no_wheel_only_packages() -> None:
    """python3.X-venv pulls ensurepip's *.whl files: the builder needs them, the final image must not."""
    builder, final = stages(render_dockerfile(cuda_plan(apt=("python3-venv", "python3-pip-whl", "git"))))
    builder_apt = next(v for c, v in builder if c == "RUN" and "apt-get install" in v)
    final_apt = next(v for c, v in final if c == "RUN" and "apt-get install" in v)
    assert "python3.12-venv" in builder_apt and "python3-venv" in builder_apt
    for wheel_only in ("python3.12-venv", "python3-venv", "python3-pip-whl"):
        assert wheel_only not in final_apt
    assert "python3.12 " in final_apt and "git " in final_apt


@pytest.mark.parametrize(
    ("files", "offline"), [([".keep"], False), ([".keep", "numpy-2.1.3-cp312.whl"], True)]
)
def test_wheelhouse_switch_runs_in_bash(tmp_path: Path, files: list[str], offline: bool) -> None:
    """The builder's install RUN, executed with pip and venv replaced by echo: offline iff wheels exist,
    and the venv's envbuild-installed-from says which way it went."""
    run = next(
        c.value[0]
        for c in dockerfile.parse_string(render_dockerfile(cuda_plan()))
        if c.cmd == "RUN" and "requirements-rebuild.txt" in c.value[0]
    )
    for name in files:
        (tmp_path / "wheelhouse").mkdir(exist_ok=True)
        (tmp_path / "wheelhouse" / name).write_text("")
    script = (
        run.replace("/tmp/envbuild", str(tmp_path))
        .replace("python3.12 -m venv /opt/venv", "true")
        .replace("/opt/venv/bin/python -m pip", "echo pip")
        .replace("/opt/venv/envbuild-installed-from", str(tmp_path / "installed-from"))
    )
    proc = subprocess.run(
        ["bash", "-o", "pipefail", "-c", script], capture_output=True, text=True, check=True
    )
    assert proc.stdout.startswith("pip install --no-cache-dir")
    assert ("--no-index" in proc.stdout) is offline
    assert f"-r {tmp_path}/requirements-rebuild.txt" in proc.stdout
    said = (tmp_path / "installed-from").read_text()
    assert said.startswith("wheelhouse: offline, pip --no-index" if offline else "indexes: "), said
