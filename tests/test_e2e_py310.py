"""End to end on the declared Python floor: an Ubuntu 22.04 image whose Python is 3.10.

envbuild requires Python >= 3.10, and Ubuntu 22.04's python3 is 3.10.  A profile with
``base.os = "ubuntu22.04"`` and ``python.version = "3.10"`` builds the validator's venv (/opt/envbuild,
from the bundle's tools/: envbuild's own wheel and its dependencies, locked for CPython 3.10) on that
Python; ``validate --image`` must then run there and pass.

No registry here: the base is ``envbuild/ubuntu:22.04``, made by ``scripts/base-image.sh
envbuild/ubuntu:22.04 jammy`` (debootstrap from Ubuntu's archive, with the real image's sources.list).
Marked ``docker`` and ``slow``; a missing engine or base image FAILS the test, never skips it.  The
profile is the smallest that exercises the path (one pure-Python package, no torch, no app, no checks):
CI has 20 minutes on 2 cores.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from build_support import envbuild, only_run, temporary_tag

pytestmark = [pytest.mark.docker, pytest.mark.slow]

UBUNTU_BASE = "envbuild/ubuntu:22.04"
INDEX = ("--index-url", "https://pypi.org/simple")
PROFILE = """\
name = "py310-ubuntu2204"
kind = "custom"
description = "Ubuntu 22.04 with its Python 3.10: the validator's venv on envbuild's declared floor"

[base]
os = "ubuntu22.04"

[accelerator]
backend = "cpu"

[python]
version = "3.10"
packages = ["six==1.17.0"]
"""


def _step(timings: dict[str, float], name: str, *args: str | Path) -> Any:
    started = time.monotonic()
    proc = envbuild(*args)
    timings[name] = round(time.monotonic() - started, 1)
    return proc


@pytest.mark.xdist_group("ubuntu2204-py310")  # its own image, built beside the other lanes
def test_validator_venv_on_ubuntu_2204_python_310_runs_validate(docker_client: Any, tmp_path: Path) -> None:
    import docker

    try:
        docker_client.images.get(UBUNTU_BASE)
    except docker.errors.ImageNotFound:
        pytest.fail(
            f"base image {UBUNTU_BASE} missing; run scripts/base-image.sh {UBUNTU_BASE} jammy "
            "(scripts/test.sh does)",
            pytrace=False,
        )
    profile = tmp_path / "py310-ubuntu2204.toml"
    profile.write_text(PROFILE)
    bundle = tmp_path / "bundle"
    timings: dict[str, float] = {}
    for name, args in (
        ("render", ("render", profile, "--out", bundle)),
        ("lock", ("lock", bundle, *INDEX)),
        ("fetch", ("fetch", bundle)),
    ):
        proc = _step(timings, name, *args)
        assert proc.returncode == 0, f"envbuild {name} exited {proc.returncode}:\n{proc.stderr}"

    lock = json.loads((bundle / "envbuild.lock.json").read_text())
    assert lock["os"] == "ubuntu22.04" and lock["python_version"] == "3.10"
    assert [(d["name"], d["version"]) for d in lock["distributions"]] == [("six", "1.17.0")]
    # The validator's venv is locked for the image's Python: on 3.10 envbuild reads TOML with tomli.
    tools = (bundle / "tools" / "requirements.txt").read_text()
    assert "for CPython 3.10" in tools and "\ntomli==" in tools, tools[:2000]

    with temporary_tag(docker_client, "py310-ubuntu2204") as tag:
        built = _step(timings, "build", "build", bundle, "--tag", tag, "--base-image", UBUNTU_BASE, "--quiet")
        assert built.returncode == 0, f"envbuild build exited {built.returncode}:\n{built.stderr[-5000:]}"
        out = tmp_path / "runs"
        validate = ("validate", "--image", tag, "--gpus", "none", "--json", "--out", out)
        proc = _step(timings, "validate", *validate)
        size = docker_client.images.get(tag).attrs["Size"]
        print(f"py310-ubuntu2204: seconds {timings}, image {size / 1e6:.0f} MB")  # with -s, or on failure
        assert proc.returncode == 0, f"envbuild validate exited {proc.returncode}:\n{proc.stderr[-5000:]}"
        result = json.loads(proc.stdout)
        assert result["ok"] is True, result["findings"]
        report = result["report"]
        assert report["ok"] is True and report["first_failure"] is None
        _, copied = only_run(out)
        assert copied["run_id"] == report["run_id"] and copied["ok"] is True

        status = {s["stage"]: s for s in report["stages"]}
        assert {name: status[name]["status"] for name in ("interpreter", "os", "packages")} == dict.fromkeys(
            ("interpreter", "os", "packages"), "passed"
        )
        assert {s["status"] for s in report["stages"]} <= {"passed", "skipped"}
        # the interpreter under test: the image's venv, on Ubuntu's Python 3.10
        python = status["interpreter"]["facts"]
        assert python["executable"] == "/opt/venv/bin/python" and python["implementation"] == "CPython"
        assert python["version_info"][:2] == [3, 10] and python["version"].startswith("3.10."), python
        assert python["realpath"] == "/usr/bin/python3.10"
        system = status["os"]["facts"]
        assert (system["id"], system["version_id"], system["libc_version"]) == ("ubuntu", "22.04", "2.35")
        assert status["packages"]["facts"]["declared_installed"] == {"six": "1.17.0"}
        assert not status["packages"]["facts"]["differences"]
        # the validator itself ran on 3.10 (platform.python_version() of the validating process)
        assert report["host"]["validator_python"].startswith("3.10."), report["host"]

        # ... from /opt/envbuild, a venv on the same Python, reading TOML through tomli
        probe = (
            "import platform, sys, envbuild.compat as c; "
            "print(sys.executable, platform.python_version(), c.tomllib.__name__)"
        )
        seen = docker_client.containers.run(
            tag,
            ["bash", "-c", f"readlink -f /usr/local/bin/envbuild /opt/envbuild/bin/python; "
             f"/opt/envbuild/bin/python -c '{probe}'"],
            remove=True,
        ).decode().split()  # fmt: skip
        assert seen[:3] == ["/opt/envbuild/bin/envbuild", "/usr/bin/python3.10", "/opt/envbuild/bin/python"]
        assert seen[3].startswith("3.10.") and seen[4] == "tomli", seen
