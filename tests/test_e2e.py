"""End to end with the real engine: render -> lock -> fetch -> build -> validate inside the image.

Marked ``docker`` and ``slow``; CI runs them for real and a missing engine FAILS them (the
``docker_client`` fixture), never skips.  One ``pytorch-cpu`` image is built per session (about
190 s on 2 cores; the fixture ``pytorch_cpu`` in tests/conftest.py) and shared by the tests that need
it, tests/test_source_build.py's included; every image is tagged with a uuid and removed afterwards.

1. The built-in ``pytorch-cpu`` profile, extended by one sdist built from source (``eb-addop``,
   tests/addop_support.py), rendered, locked (every distribution pinned with its sha256), fetched,
   built in hash mode on the local Debian 12 base; ``validate --image`` passes every applicable stage,
   including the C++ op built with the image (no compiler in it), the sdist's import and the
   checkpoint round trip.
2. A derived image with another sympy (a dependency of torch, inside torch's ``sympy>=1.13.3``)
   fails at ``packages``, naming sympy, both versions and that torch required it.
3. The ``ubuntu`` preparation on the local base: tests/test_container_docker.py
   (``test_ubuntu_preparation_on_the_local_base``, on the container tests' image).
4. container-structure-test with tests/structure/pytorch-cpu.yaml, plus a scan of every layer of
   ``docker save`` for wheel files.
5. Secrets (in 3., no extra build; its helpers are here): the ``--ca-cert`` CA (not kept) and secrets
   planted in the environment of ``build`` and ``validate`` appear in no layer, config blob or history
   entry of the image, in no report file and in no output; the same scan finds the lock's bytes and a
   RUN line.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from build_support import (
    Built,
    Rebuilt,
    assert_installed_offline,
    build_step,
    envbuild,
    only_run,
    saved_image,
    temporary_tag,
)
from conftest import PYTORCH_CPU_PROFILE

from envbuild.image.refs import slug

pytestmark = [pytest.mark.docker, pytest.mark.slow]
# The tests of the pytorch-cpu image (and the image derived from it) run in one xdist worker, which
# builds it once (tests/conftest.py).
pytorch_cpu_image = pytest.mark.xdist_group("pytorch-cpu")

REPO = Path(__file__).resolve().parent.parent
BASE_IMAGE = os.environ.get("ENVBUILD_TEST_BASE_IMAGE", "envbuild/debian:12")
STRUCTURE = REPO / "tests" / "structure" / "pytorch-cpu.yaml"
CST = Path(sys.executable).parent / "container-structure-test"
TARGET = (
    "--only-binary=:all:",
    "--python-version",
    "3.11",
    "--implementation",
    "cp",
    "--platform",
    "manylinux_2_17_x86_64",
)
# A transitive dependency moved inside its parent's range: torch requires sympy>=1.13.3, the lock
# took the newest sympy, the derived image installs 1.13.3.
DRIFT = ("sympy", "1.13.3")


@pytest.fixture(scope="session")
def drifted(
    pytorch_cpu: Built, docker_client: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """FROM the pytorch-cpu image, with sympy 1.13.3 installed offline from a wheel fetched on the host.

    The wheel is deliberately left in /tmp so the structure test can be seen to catch it.
    """
    name, other = DRIFT
    context = tmp_path_factory.mktemp("drift")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "-d",
            str(context),
            *TARGET,
            f"{name}=={other}",
        ],
        check=True,
        capture_output=True,
        env={**os.environ, "PIP_RETRIES": "0"},
    )
    (wheel,) = context.glob("*.whl")
    (context / "Dockerfile").write_text(
        f"FROM {pytorch_cpu.tag}\nUSER root\nCOPY {wheel.name} /tmp/{wheel.name}\n"
        f"RUN /opt/venv/bin/python -m pip install --no-index --no-deps /tmp/{wheel.name}\nUSER envbuild\n"
    )
    with temporary_tag(docker_client, "pytorch-cpu-drift") as tag:
        docker_client.images.build(path=str(context), tag=tag, rm=True, forcerm=True)
        yield tag


@pytorch_cpu_image
def test_pytorch_cpu_validates_inside_the_image(
    pytorch_cpu: Built, docker_client: Any, tmp_path: Path
) -> None:
    log = (
        pytorch_cpu.bundle / f"build-{pytorch_cpu.tag.replace('/', '-').replace(':', '-')}.log"
    ).read_text()
    # Installed offline, from the wheelhouse, with --no-deps (the file is locked): the image says so,
    # from the cache too (an engine that built this exact context before).
    install, _ = build_step(log, "-m venv /opt/venv")
    assert_installed_offline(install, docker_client, pytorch_cpu.tag)
    lock = json.loads((pytorch_cpu.bundle / "envbuild.lock.json").read_text())
    assert lock["resolved"] is True
    locked = {d["name"]: d for d in lock["distributions"]}
    assert {"torch", "numpy", "sympy", "filelock", "jinja2"} <= set(locked)
    assert locked["torch"]["local"] == "cpu" and locked["torch"]["version"] == "2.13.0"
    requirements = (pytorch_cpu.bundle / "requirements-rebuild.txt").read_text()
    assert "--require-hashes" in requirements.splitlines()
    assert f"--hash=sha256:{locked['torch']['files'][0]['sha256']}" in requirements
    out = tmp_path / "runs"
    proc = envbuild("validate", "--image", pytorch_cpu.tag, "--out", out)
    assert proc.returncode == 0, proc.stderr
    run, report = only_run(out)
    assert report["format"] == "envbuild.report/1" and report["ok"] is True
    assert report["lock"]["content"]["profile_name"] == PYTORCH_CPU_PROFILE
    status = {s["stage"]: s for s in report["stages"]}
    applicable = [
        "interpreter",
        "os",
        "packages",
        "accelerator",
        "compute",
        "extensions",
        "checkpoint",
        "checks",
    ]
    assert {name: status[name]["status"] for name in applicable} == dict.fromkeys(applicable, "passed")
    # A CPU lock has no devices and declares no memory: those two, and only those, are not applicable.
    skipped = {name for name, s in status.items() if s["status"] == "skipped"}
    assert skipped == {"devices", "memory"}
    packages = status["packages"]["facts"]
    assert packages["lock_resolved"] is True and packages["compared"] == "distributions"
    # every distribution the image installs is compared; the sdist's build dependency (ninja) is not one
    installs = [d for d in lock["distributions"] if d["role"] != "build"]
    assert len(installs) == len(lock["distributions"]) - 1
    assert packages["locked_count"] == len(installs) and not packages["differences"]
    parts = {p["name"]: p for p in status["extensions"]["facts"]["parts"]}
    # compiled in the builder stage, imported and run here with no compiler (the structure test checks
    # there is none)
    op = parts["cpp_op"]
    assert op["status"] == "passed" and op["source"] == "image", op
    assert op["path"] == "/opt/envbuild-probe-ops/envbuild_probe_cpp_image.so"
    # the sdist built from source in the builder stage: imported (which runs its op) with no compiler here
    assert parts["import:eb_addop"]["status"] == "passed", parts
    # the lock names an extension package, whose smoke test runs apart from the warm worker (the warm
    # worker's own load of cached ops: tests/test_validate_cpu.py)
    facts = status["extensions"]["facts"]
    assert facts["process"] == "its own" and "names extension packages" in facts["why_own"], facts
    # the op validate loaded from the image (above) is the step's real output, from the cache too; a step
    # that ran also says so in the log
    ops_step, cached = build_step(log, "envbuild-probe-ops.py build")
    assert cached or "envbuild-probe-ops: cpp op built in" in ops_step, ops_step
    verify = envbuild("report", "verify", run)
    assert verify.returncode == 0, verify.stdout + verify.stderr


@pytorch_cpu_image
def test_drifted_package_fails_at_packages(drifted: str, pytorch_cpu: Built, tmp_path: Path) -> None:
    name, installed = DRIFT
    lock = json.loads((pytorch_cpu.bundle / "envbuild.lock.json").read_text())
    (locked,) = [d["version"] for d in lock["distributions"] if d["name"] == name]
    assert locked != installed
    out = tmp_path / "runs"
    proc = envbuild("validate", "--image", drifted, "--out", out, "--json")
    assert proc.returncode == 1, proc.stderr
    _, report = only_run(out)
    assert json.loads(proc.stdout)["report"]["run_id"] == report["run_id"]
    assert report["ok"] is False
    assert report["first_failure"]["stage"] == "packages"
    error = report["first_failure"]["error"]
    assert f"{name} {installed} instead of {locked} (required by torch)" in error
    assert "torch 2" not in error and "numpy" not in error  # exactly that package, nothing else
    status = {s["stage"]: s["status"] for s in report["stages"]}
    assert status["interpreter"] == status["os"] == "passed" and status["packages"] == "failed"


@pytorch_cpu_image
def test_container_structure_test(pytorch_cpu: Built) -> None:
    proc = subprocess.run(
        [str(CST), "test", "--image", pytorch_cpu.tag, "--config", str(STRUCTURE)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "Failures:    0" in proc.stdout


@pytorch_cpu_image
def test_container_structure_test_catches_a_left_wheel(drifted: str) -> None:
    proc = subprocess.run(
        [str(CST), "test", "--image", drifted, "--config", str(STRUCTURE)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout[-3000:]  # container-structure-test: a test failed
    assert "Failures:    1" in proc.stdout
    failing = proc.stdout.split("=== RUN: Command Test: no wheel file is left anywhere in the file system")[1]
    assert failing.split("=== RUN:")[0].count("--- FAIL") == 1


def wheels_in_layers(client: Any, tag: str) -> list[str]:
    """Every ``*.whl`` path in every layer of ``docker save`` (deleted files stay in lower layers)."""
    found: list[str] = []
    with saved_image(client, tag) as outer:
        for member in outer:
            if not member.isfile() or not (member.name.endswith("layer.tar") or "blobs/" in member.name):
                continue
            handle = outer.extractfile(member)
            try:
                with tarfile.open(fileobj=handle, mode="r|*") as layer:
                    found += [f"{member.name}: {m.name}" for m in layer if m.name.endswith(".whl")]
            except tarfile.ReadError:
                continue  # a config or manifest blob, not a layer
    return found


@pytorch_cpu_image
def test_no_wheel_in_any_layer(pytorch_cpu: Built, drifted: str, docker_client: Any) -> None:
    assert wheels_in_layers(docker_client, pytorch_cpu.tag) == []
    # The scan does see a wheel when one is there: the derived image copied one into /tmp.
    assert any(
        name.endswith(".whl") and DRIFT[0] in name for name in wheels_in_layers(docker_client, drifted)
    )


# ---- build records, image diff, rebuild --verify -------------------------------------------------


@pytorch_cpu_image
def test_build_writes_a_record_of_the_image(pytorch_cpu: Built, docker_client: Any) -> None:
    from packaging.utils import canonicalize_name

    from envbuild.digest import sha256_file
    from envbuild.image.record import read_record

    record = read_record(pytorch_cpu.bundle / f"build-{slug(pytorch_cpu.tag)}.record.json")
    info = docker_client.api.inspect_image(pytorch_cpu.tag)
    assert record.image_id == info["Id"] and record.diff_ids == info["RootFS"]["Layers"]
    base = docker_client.api.inspect_image(BASE_IMAGE)
    assert record.inputs["base_image"] == {
        "ref": BASE_IMAGE,
        "id": base["Id"],
        "diff_ids": base["RootFS"]["Layers"],
    }
    lock_path = pytorch_cpu.bundle / "envbuild.lock.json"
    assert record.inputs["lock_sha256"] == sha256_file(lock_path)
    lock = json.loads(lock_path.read_text())
    locked_files = {(f["filename"], f["sha256"]) for d in lock["distributions"] for f in d["files"]}
    assert {(w["file"], w["sha256"]) for w in record.inputs["wheels"]} == locked_files
    # every locked distribution is installed in /opt/venv at its locked version, by pip (the sdist too, as
    # the wheel the builder stage made of it), except the sdist's build dependencies: those never are
    venv = {canonicalize_name(d.name): d for d in record.files.python if d.location.startswith("/opt/venv/")}
    roles = {dist["role"] for dist in lock["distributions"]}
    assert roles == {"install", "source", "build"}, roles
    for dist in lock["distributions"]:
        if dist["role"] == "build":
            assert canonicalize_name(dist["name"]) not in venv, dist
            continue
        installed = venv[canonicalize_name(dist["name"])]
        assert installed.version == dist["version"] + (f"+{dist['local']}" if dist["local"] else "")
        assert installed.installer == "pip"
    apt = {a.name: a.version for a in record.files.apt}
    # no compiler: the validator's op was compiled in the builder stage, and the record holds it
    assert apt.get("python3.11") and apt.get("g++") is None
    entries = record.files.entries
    assert entries["/opt/envbuild-probe-ops/ops.json"].sha256
    assert entries["/opt/envbuild-probe-ops/envbuild_probe_cpp_image.so"].size > 0
    assert entries["/etc/envbuild/envbuild.lock.json"].sha256 == sha256_file(lock_path)
    torch_init = "/opt/venv/lib/python3.11/site-packages/torch/__init__.py"
    assert record.files.owners[torch_init] == "py:torch@/opt/venv/lib/python3.11/site-packages"
    assert record.files.owners["/usr/bin/python3.11"] == "deb:python3.11-minimal"
    assert entries["/workspace"].uid == 10001  # owners and modes are recorded, timestamps never are
    data = json.loads((pytorch_cpu.bundle / f"build-{slug(pytorch_cpu.tag)}.record.json").read_text())
    assert data["manifest_columns"] == ["path", "type", "mode", "uid", "gid", "size", "sha256", "link"]


@pytorch_cpu_image
def test_image_diff_attributes_the_drift(pytorch_cpu: Built, drifted: str) -> None:
    record = pytorch_cpu.bundle / f"build-{slug(pytorch_cpu.tag)}.record.json"
    proc = envbuild("image", "diff", record, drifted, "--json")
    assert proc.returncode == 1, proc.stderr
    diff = json.loads(proc.stdout)
    assert diff["identical"] is False
    name, other = DRIFT
    changes = {(p["kind"], p["name"].split(" in ")[0].lower()): p for p in diff["packages"]}
    sympy = changes[("py", name)]
    assert sympy["after"] == other and sympy["before"] != other and sympy["paths"] > 100
    paths = {p["path"]: p for p in diff["paths"]}
    assert not [p for p in paths if "/site-packages/sympy/" in p]  # reported with the package
    # the wheel the drift left in /tmp is noise by the documented list: counted there, not reported
    assert not [p for p in paths if p.startswith("/tmp/")]
    noise = {n["pattern"]: n for n in diff["noise"]}
    assert noise["/tmp/*"]["paths"] >= 1 and noise["/tmp/*"]["reason"]


@pytorch_cpu_image
def test_rebuild_without_the_cache_is_equal_on_content(
    pytorch_cpu: Built, pytorch_cpu_rebuilt: Rebuilt, docker_client: Any
) -> None:
    """T1: a copy of the bundle in another folder, rebuilt without the cache, equals the first build on
    content (no difference outside the noise list, which stays short); the sdist built from source is
    reproduced by its kept wheel (tests/test_source_build.py reads the rebuild's log)."""
    from envbuild.image.diff import NOISE

    assert len(NOISE) <= 20
    proc = pytorch_cpu_rebuilt.proc
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    diff = json.loads(proc.stdout)
    assert diff["identical"] is True and diff["counts"] == {"package": 0, "content": 0, "metadata": 0}
    # the ids differ, the content does not
    assert pytorch_cpu_rebuilt.image_id != docker_client.api.inspect_image(pytorch_cpu.tag)["Id"]


def _lot(
    client: Any, tag: str, network: str, name: str, rank: int, fleet: str, token: str, budget: str
) -> Any:
    command = ["/usr/local/bin/envbuild", "validate", "--stages", "performance", "--perf-budget", budget,
               "--fleet", fleet, "--nodes", "2", "--node-rank", str(rank), "--json", "--out", "/tmp/runs",
               "--timeout", "performance=60"]  # fmt: skip
    return client.containers.run(
        tag, command, entrypoint=[], name=name, hostname=name, network=network, detach=True,
        environment={"ENVBUILD_FLEET_TOKEN": token},  # never on the command line: ps shows arguments
    )  # fmt: skip


def _finished(container: Any) -> tuple[int, dict[str, Any], str]:
    status = container.wait(timeout=300)["StatusCode"]
    out = container.logs(stdout=True, stderr=False).decode()
    err = container.logs(stdout=False, stderr=True).decode()
    return status, json.loads(out), err


@pytorch_cpu_image
def test_two_lots_measure_an_all_reduce_across_a_docker_network(
    pytorch_cpu: Built, docker_client: Any
) -> None:
    """Two containers of the image on a user-defined network (as two rented lots): envbuild's handshake,
    then one gloo rank per lot; a third lot pointed at a port nobody listens on fails naming it."""
    token = secrets.token_hex(16)
    net = docker_client.networks.create(f"envbuild-fleet-{secrets.token_hex(4)}", driver="bridge")
    names = [f"lot{i}-{secrets.token_hex(3)}" for i in range(3)]
    started: list[Any] = []
    try:
        fleet = f"{names[0]}:29500"
        started += [
            _lot(docker_client, pytorch_cpu.tag, net.name, names[r], r, fleet, token, "6") for r in (0, 1)
        ]
        blocked = f"{names[0]}:29600"  # nothing listens there: a closed firewall looks the same
        started.append(_lot(docker_client, pytorch_cpu.tag, net.name, names[2], 1, blocked, token, "2"))
        (s0, r0, e0), (s1, r1, e1), (s2, r2, e2) = (_finished(c) for c in started)
    finally:
        for container in started:
            container.remove(force=True)
        net.remove()
    for status, report, err in ((s0, r0, e0), (s1, r1, e1)):
        assert status == 0, err[-3000:]
        (stage,) = [s for s in report["report"]["stages"] if s["stage"] == "performance"]
        fleet_facts = stage["facts"]["fleet"]
        assert fleet_facts["nodes"] == 2 and fleet_facts["all_reduce"]["sums_ok"] is True
        assert fleet_facts["all_reduce"]["backend"] == "gloo" and fleet_facts["all_reduce"]["sizes"]
    assert r0["report"]["stages"][-1]["facts"]["fleet"]["node_rank"] == 0
    assert len(r0["report"]["stages"][-1]["facts"]["fleet"]["peers"]) == 1  # the lot that joined
    assert r1["report"]["stages"][-1]["facts"]["fleet"]["peers"] == [fleet]
    assert token not in json.dumps(r0) + json.dumps(r1) + e0 + e1
    assert s2 == 1, e2[-2000:]
    (stage,) = [s for s in r2["report"]["stages"] if s["stage"] == "performance"]
    assert f"cannot reach node 0 at {blocked} within 30 s" in stage["error"]
    assert "TCP 29600 (envbuild's handshake) and 29601 (torch's store)" in stage["hint"]
