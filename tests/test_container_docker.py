"""The ``container`` stage and the recommended run options, against real containers.

One small image is built per module from a real bundle (the ``ubuntu`` preparation re-declared for
the local Debian 12 base, with ``resources.memory_gib = 1`` and ``resources.cpus = 1``), with an extra CA
and secrets planted in the build's environment: the same image proves the ``ubuntu`` preparation end to
end (``test_ubuntu_preparation_on_the_local_base``: every stage, the CA and the secrets in no layer), so
one image is built for both (before, test_e2e built its own: about 200 s on 2 loaded CPUs).  Every
container-stage validation runs
``envbuild validate --image TAG --stages container`` (the validator as the image's user, uid 10001),
so each takes seconds.  The engine here is cgroup v1; the v2 parsing is covered by hand-written trees
in ``test_container_rules.py`` and, on a cgroup v2 engine (CI runners), by these same tests.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from build_support import envbuild, make_ca, needles_in_image, only_run, planted_env, temporary_tag
from conftest import BASE_IMAGE

from envbuild.boundary import parse_json
from envbuild.image.refs import slug
from envbuild.models import Lock
from envbuild.runopts import lock_run_options, run_command

# One xdist worker builds the box and runs every test here (tests/conftest.py).
pytestmark = [pytest.mark.docker, pytest.mark.xdist_group("container-box")]


@dataclass(frozen=True)
class Box:
    tag: str
    bundle: Path
    lock: Lock
    build_stderr: str
    built: subprocess.CompletedProcess[str]
    ca: Path  # the extra CA the build trusted (--ca-cert, not kept)
    planted: dict[str, str]  # secrets in the environment of the build


PROFILE = (
    'name = "container-box"\nkind = "ubuntu"\nextends = "ubuntu"\n'
    'description = "The ubuntu preparation on the local Debian 12 base, with a memory and CPU need"\n\n'
    f'[base]\nos = "debian12"\nimage = "{BASE_IMAGE}"\n\n[python]\nversion = "3.11"\n\n'
    "[resources]\nmemory_gib = 1\ncpus = 1\n"
)


@pytest.fixture(scope="module")
def box(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Box]:
    folder = tmp_path_factory.mktemp("container-box")
    profile = folder / "container-box.toml"
    profile.write_text(PROFILE)
    cache = folder / "cache"
    ca, _ = make_ca(folder)
    planted = planted_env()
    with temporary_tag(docker_client, "container-box") as tag:
        # A profile ref: rendered into the cache, its wheelhouse fetched, then built, in one command.
        # No --base-image: the profile's own [base] image.  An extra CA, as behind TLS interception.
        built = envbuild(
            *("build", profile, "--tag", tag, "--quiet", "--no-record", "--ca-cert", ca),
            env={"XDG_CACHE_HOME": str(cache), **planted},
        )
        assert built.returncode == 0, built.stderr
        (bundle,) = (cache / "envbuild" / "bundles").iterdir()
        lock = parse_json(Lock, (bundle / "envbuild.lock.json").read_text())
        yield Box(tag, bundle, lock, built.stderr, built, ca, planted)


def validate(tag: str, out: Path, *docker_args: str) -> tuple[subprocess.CompletedProcess[str], Any]:
    proc = envbuild(
        "validate",
        "--image",
        tag,
        "--out",
        out,
        "--stages",
        "container",
        *(f"--docker-arg={a}" for a in docker_args),
    )
    runs = sorted(out.iterdir()) if out.is_dir() else []
    assert len(runs) == 1, proc.stderr
    report = json.loads((runs[0] / "report.json").read_text())
    (stage,) = [s for s in report["stages"] if s["stage"] == "container"]
    return proc, stage


def readme_options(bundle: Path) -> str:
    """The options of the bundle README's `docker run` line (between `-it` and the runs volume)."""
    text = (bundle / "README.md").read_text()
    block = text.split("## Run", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    line = " ".join(part.strip() for part in block.replace("\\\n", " ").split())
    match = re.fullmatch(r'docker run --rm -it (.*) -v "\$PWD/runs:/workspace/runs" \S+', line)
    assert match, line
    return match.group(1)


def test_the_readme_command_is_the_validated_one_and_passes(box: Box, tmp_path: Path) -> None:
    """The bundle README's options, the one function's and those validate --image starts the
    container with are the same; with them the container stage passes (1 GiB of /dev/shm: half of
    memory_gib = 1, at least 1 GiB) and records the engine's cgroup."""
    options = lock_run_options(box.lock)
    assert readme_options(box.bundle) == " ".join(options.cli_args()) == "--shm-size 1g"
    assert run_command(box.lock, box.tag).startswith("docker run --rm -it --shm-size 1g -v ")
    assert f"envbuild: run it with: {run_command(box.lock, box.tag)}\n" in box.build_stderr
    proc, stage = validate(box.tag, tmp_path / "runs")
    assert proc.returncode == 0, proc.stderr
    assert f"validating {box.tag} as `docker run --shm-size 1g {box.tag}`" in proc.stderr
    assert stage["status"] == "passed", stage
    facts = stage["facts"]
    assert facts["shm_bytes"] == 1 << 30 and facts["uid"] == 10001
    assert facts["cgroup"]["version"] in (1, 2) and facts["cgroup"]["memory_limit_bytes"] is None
    assert facts["nodes"] == []  # a CPU lock needs no device node


def test_shm_64m_fails_and_2g_passes(box: Box, tmp_path: Path) -> None:
    proc, stage = validate(box.tag, tmp_path / "small", "--shm-size=64m")
    assert proc.returncode == 1 and stage["status"] == "failed"
    assert stage["facts"]["shm_bytes"] == 64 << 20
    assert "/dev/shm holds 64 MiB, under 1 GiB" in stage["error"]
    assert "--shm-size 1g" in stage["error"] and "--shm-size" in stage["hint"]
    assert "validating" in proc.stderr and "--shm-size=64m" in proc.stderr
    proc, stage = validate(box.tag, tmp_path / "large", "--shm-size=2g")
    assert proc.returncode == 0 and stage["status"] == "passed", stage
    assert stage["facts"]["shm_bytes"] == 2 << 30


def test_memory_and_cpus_below_the_declared_need_fail_naming_the_flags(box: Box, tmp_path: Path) -> None:
    proc, stage = validate(box.tag, tmp_path / "runs", "--memory=512m", "--cpus=0.5")
    assert proc.returncode == 1 and stage["status"] == "failed"
    cgroup = stage["facts"]["cgroup"]
    assert cgroup["memory_limit_bytes"] == 512 << 20 and cgroup["cpu_quota_cores"] == 0.5
    error = stage["error"]
    assert "memory limit is 512 MiB" in error and "resources.memory_gib = 1 GiB" in error
    assert "--memory 1g" in error
    assert "may use 0.5 CPU(s)" in error and "--cpus 1" in error
    assert "--memory 1g" in stage["hint"] and "--cpus 1" in stage["hint"]
    # enough of both: passes
    proc, stage = validate(box.tag, tmp_path / "enough", "--memory=2g", "--cpus=1")
    assert proc.returncode == 0 and stage["status"] == "passed", stage


@pytest.fixture(scope="module")
def rocm_box(box: Box, docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The box with its lock's backend set to rocm (the only change, written by this test), so the
    stage asks for /dev/kfd and /dev/dri/renderD*."""
    context = tmp_path_factory.mktemp("rocm-box")
    data = json.loads((box.bundle / "envbuild.lock.json").read_text())
    data["backend"] = "rocm"
    (context / "envbuild.lock.json").write_text(json.dumps(data))
    (context / "Dockerfile").write_text(
        f"FROM {box.tag}\nUSER root\n"
        "COPY envbuild.lock.json /etc/envbuild/envbuild.lock.json\nUSER envbuild\n"
    )
    with temporary_tag(docker_client, "container-rocm-box") as tag:
        docker_client.images.build(path=str(context), tag=tag, rm=True, forcerm=True)
        yield tag


def host_node(path: Path, device: tuple[int, int], mode: int, gid: int) -> Path:
    """A real character device node made on the host, given to the container with --device: it stands
    in for a GPU's node (this machine has no AMD GPU)."""
    os.mknod(path, 0o020000 | mode, os.makedev(*device))
    os.chmod(path, mode)  # mknod's mode passes through the umask
    os.chown(path, 0, gid)
    return path


def test_device_nodes_the_user_cannot_open(rocm_box: str, tmp_path: Path) -> None:
    """/dev/kfd stands for a node of the host's render group: /dev/null's device (1:3) made on the host
    as root:4242 mode 0660, which uid 10001 may not open until --group-add 4242.  The render node is
    /dev/fuse's device (10:229: opening it needs no privilege, and Docker's default device rules do
    not allow it), mode 0666, given read-only (--device ...:r): the device cgroup refuses a read-write
    open whatever the mode, and the fix is --device with rwm."""
    kfd = host_node(tmp_path / "kfd", (1, 3), 0o660, 4242)
    render = host_node(tmp_path / "renderD128", (10, 229), 0o666, 0)
    devices = (f"--device={kfd}:/dev/kfd", f"--device={render}:/dev/dri/renderD128:r")
    # --gpus none: no recommended device options (this host has no /dev/kfd); the nodes come from
    # --docker-arg, as a user's own --device flags would
    proc = envbuild(
        "validate",
        "--image",
        rocm_box,
        "--out",
        tmp_path / "denied",
        "--stages",
        "container",
        "--gpus",
        "none",
        *(f"--docker-arg={d}" for d in devices),
    )
    assert proc.returncode == 1, proc.stderr
    (run,) = (tmp_path / "denied").iterdir()
    stage = json.loads((run / "report.json").read_text())["stages"][0]
    assert stage["stage"] == "container" and stage["status"] == "failed"
    nodes = {n["path"]: n for n in stage["facts"]["nodes"]}
    assert nodes["/dev/kfd"]["errno"] == "EACCES" and nodes["/dev/kfd"]["gid"] == 4242
    assert nodes["/dev/kfd"]["mode"] == "0660" and nodes["/dev/kfd"]["char_device"] is True
    assert nodes["/dev/dri/renderD128"]["errno"] == "EPERM"
    assert "--group-add 4242" in stage["error"] and "--group-add 4242" in stage["hint"]
    assert "--device /dev/dri/renderD128" in stage["error"]
    # the group and full permissions: both open, the stage passes
    proc = envbuild(
        "validate",
        "--image",
        rocm_box,
        "--out",
        tmp_path / "granted",
        "--stages",
        "container",
        "--gpus",
        "none",
        f"--docker-arg={devices[0]}",
        f"--docker-arg=--device={render}:/dev/dri/renderD128",
        "--docker-arg=--group-add=4242",
    )
    (run,) = (tmp_path / "granted").iterdir()
    stage = json.loads((run / "report.json").read_text())["stages"][0]
    assert proc.returncode == 0 and stage["status"] == "passed", stage
    nodes = stage["facts"]["nodes"]
    assert nodes and all(n["open"] == "ok" for n in nodes), nodes


# The h100 target as `envbuild lock` writes it (the pytorch profile for debian12, Python 3.11, h100).
H100 = {
    "arch": "sm_90",
    "cards_per_lot": 1,
    "device_memory_gib": 80.0,
    "devices_per_card": 1,
    "id": "h100",
    "memory_gib": 80.0,
    "name": "NVIDIA H100 SXM 80GB",
    "vendor": "nvidia",
}


@pytest.fixture(scope="module")
def cuda_box(box: Box, docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The box with a CUDA lock for one H100 (CUDA 13.0, driver >= 580.95.05): its own distributions,
    which the image holds, so interpreter, os and packages can pass; only the GPU is missing."""
    context = tmp_path_factory.mktemp("cuda-box")
    data = json.loads((box.bundle / "envbuild.lock.json").read_text())
    data.update(
        backend="cuda",
        accelerator_version="13.0",
        min_driver="580.95.05",
        targets=[H100],
        required_archs=["sm_90"],
        gpus=1,
    )
    (context / "envbuild.lock.json").write_text(json.dumps(data))
    (context / "Dockerfile").write_text(
        f"FROM {box.tag}\nUSER root\n"
        "COPY envbuild.lock.json /etc/envbuild/envbuild.lock.json\nUSER envbuild\n"
    )
    with temporary_tag(docker_client, "container-cuda-box") as tag:
        docker_client.images.build(path=str(context), tag=tag, rm=True, forcerm=True)
        yield tag


def test_cuda_lock_on_a_host_without_the_nvidia_runtime(
    cuda_box: str, docker_client: Any, tmp_path: Path
) -> None:
    """This engine has no NVIDIA runtime (a GPU-less CI host): with no flags, validate --image says so
    first, validates without GPUs and with --keep-going, writes the report and exits 1; the first failure
    names the missing GPU device, the last line what to run on the rented machine.  --gpus all fails
    at once with the same diagnosis, writing nothing."""
    assert "nvidia" not in (docker_client.info().get("Runtimes") or {})  # the premise, on this engine
    out = tmp_path / "runs"
    proc = envbuild("validate", "--image", cuda_box, "--out", out)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("envbuild: this host's Docker has no NVIDIA runtime (its runtimes: "), lines
    assert "the GPUs cannot be passed to the container" in lines[0] and "with --keep-going" in lines[0]
    assert lines[1] == f"envbuild: validating {cuda_box} as `docker run --shm-size 1g {cuda_box}`"
    (run,) = out.iterdir()
    report = json.loads((run / "report.json").read_text())
    assert report["ok"] is False
    status = {s["stage"]: s for s in report["stages"]}
    for stage in ("interpreter", "os", "packages"):
        assert status[stage]["status"] == "passed", status[stage]
    assert status["accelerator"]["status"] == "failed"
    assert "cuda lock but the vendor tools see no GPU" in status["accelerator"]["error"]
    first = report["first_failure"]
    assert first["stage"] == "container" and "/dev/nvidiactl is missing in the container" in first["error"]
    assert lines[-1] == (
        f"envbuild: not a pass: no GPU was passed to the container; first failure: container: "
        f"{first['error']}. On the rented machine: `envbuild validate --image {cuda_box}` with the NVIDIA "
        "container toolkit installed (`--gpus all`)"
    )
    # --gpus all asked for explicitly: the same diagnosis before anything starts, nothing written
    proc = envbuild("validate", "--image", cuda_box, "--out", tmp_path / "asked", "--gpus", "all")
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.startswith(
        f"envbuild: error: --image {cuda_box} --gpus all: this host's Docker has no NVIDIA runtime"
    )
    assert "drop --gpus all" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "asked").exists()


def test_ubuntu_preparation_on_the_local_base(box: Box, docker_client: Any, tmp_path: Path) -> None:
    """The ``ubuntu`` preparation, built on the local Debian 12 base (no registry here).

    ``ubuntu`` declares Ubuntu 24.04 with its Python 3.12: overriding only the base image would
    install packages that Debian 12 does not have (python3.12) and, were it built, the ``os`` stage
    would rightly fail.  What validates honestly is the same preparation re-declared for the base
    actually used: a profile that extends ``ubuntu`` and sets ``[base] os = "debian12"``,
    ``image = "envbuild/debian:12"`` and Debian's Python 3.11; everything else (apt tools, no torch)
    comes from ``ubuntu`` (plus this module's ``[resources]``).  Every stage then passes or is not
    applicable.
    """
    tag, bundle, ca, planted, built = box.tag, box.bundle, box.ca, box.planted, box.built
    lock = json.loads((bundle / "envbuild.lock.json").read_text())
    assert lock["base_image"] == BASE_IMAGE and {"git", "curl", "tmux"} <= set(lock["apt"])
    assert (bundle / "tools" / "SHA256SUMS").is_file() and (bundle / f"build-{slug(tag)}.log").is_file()
    out = tmp_path / "runs"
    proc = envbuild("validate", "--image", tag, "--out", out, env=planted)
    assert proc.returncode == 0, proc.stderr
    run, report = only_run(out)
    status = {s["stage"]: s["status"] for s in report["stages"]}
    assert status["interpreter"] == status["os"] == status["packages"] == "passed"
    assert set(status.values()) <= {"passed", "skipped"}
    tools = docker_client.containers.run(tag, ["bash", "-c", "git --version && tmux -V"], remove=True)
    assert b"git version" in tools and b"tmux" in tools
    # The CA trusted apt and pip in the build stages only (no --keep-ca-cert): not in the final
    # image's trust store, nor in any layer, config blob or history entry; not in the bundle.
    ca_line = ca.read_text().splitlines()[1]  # 64 characters of the certificate's own base64
    bundle_pem = docker_client.containers.run(tag, ["cat", "/etc/ssl/certs/ca-certificates.crt"], remove=True)
    assert bundle_pem.count(b"-----BEGIN CERTIFICATE-----") > 100  # Debian's roots, read whole
    assert ca_line.encode() not in bundle_pem
    assert not list((bundle / "certs").glob("*.crt"))
    needles = [ca_line, *planted.values()]
    assert needles_in_image(docker_client, tag, needles) == []
    # ... and the scan does find what is there: the lock's bytes in a layer, a RUN line in history.
    lock_head = (bundle / "envbuild.lock.json").read_text()[:300]
    control = needles_in_image(docker_client, tag, [lock_head, "useradd --no-log-init"])
    assert any(h.endswith("etc/envbuild/envbuild.lock.json") for h in control), control
    assert any(h.startswith("history ") for h in control), control
    for path in sorted(p for p in run.rglob("*") if p.is_file()):
        text = path.read_text(encoding="utf-8", errors="replace")
        assert not [n for n in needles if n in text], path
    outputs = built.stdout + built.stderr + proc.stdout + proc.stderr
    assert not [n for n in needles if n in outputs]
