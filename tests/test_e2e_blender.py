"""Blender end to end with the real engine: the built-in ``blender-cpu`` profile (``blender.source =
"pypi"``: bpy 4.5.15 from PyPI, CPU backend, Python 3.11, Debian 12).

Marked ``docker`` and ``slow``; CI runs them for real and a missing engine FAILS them (the
``docker_client`` fixture), never skips.  One image is built per session from the bundle rendered,
locked against pypi.org and fetched (the build itself is offline, from the wheelhouse); it is shared
by the tests here.

1. ``validate --image`` passes the blender stage: Blender 4.5.15 as locked, imported through
   ``import bpy`` in the image's venv, the CPU render of the fixed scene is a PNG in the report folder,
   listed in its manifest (``report verify`` passes; a changed picture is caught) and linked from
   report.md.
2. The same profile with CUDA declared (``blender.devices = ["CPU", "CUDA"]``; the planner refuses it
   for the ``cpu`` target, so it is rendered with ``--force``) fails at the blender stage naming CUDA:
   this machine has no GPU.  Its image is the first one with that bundle's lock copied in (the only
   difference the two bundles make to an image), so no second bpy install runs.

The figures (bpy import time, render time, image size, build time) are printed (``pytest -s``).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from build_support import assert_installed_offline, build_step, envbuild, ok, only_run, temporary_tag
from conftest import BASE_IMAGE

# One xdist worker builds the image and runs every test here (tests/conftest.py).
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.xdist_group("blender-cpu")]

PYPI = ("--index-url", "https://pypi.org/simple")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class Built:
    tag: str
    bundle: Path
    build_s: float
    size_bytes: int


@pytest.fixture(scope="session")
def blender_cpu(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    bundle = tmp_path_factory.mktemp("blender") / "blender-cpu"
    ok("render", "blender-cpu", "--out", bundle)
    ok("lock", bundle, *PYPI)
    ok("fetch", bundle)
    with temporary_tag(docker_client, "blender-cpu") as tag:
        started = time.monotonic()
        ok("build", bundle, "--tag", tag, "--base-image", BASE_IMAGE, "--quiet", "--no-record")
        seconds = time.monotonic() - started
        size = int(docker_client.images.get(tag).attrs["Size"])
        print(f"\nblender-cpu image: built in {seconds:.1f} s, {size / 1e6:.0f} MB")
        yield Built(tag, bundle, seconds, size)


@pytest.fixture(scope="session")
def blender_cuda(
    blender_cpu: Built, docker_client: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The blender-cpu image with the lock of the same profile declaring CUDA as well."""
    root = tmp_path_factory.mktemp("blender-cuda")
    profile = root / "blender-cuda.toml"
    profile.write_text(
        'name = "blender-cuda"\nextends = "blender-cpu"\n\n[blender]\ndevices = ["CPU", "CUDA"]\n',
        encoding="utf-8",
    )
    bundle = root / "bundle"
    check = envbuild("check", profile)
    # refused before ordering: an error finding
    assert check.returncode == 1 and "E-BLENDER-DEVICE" in check.stdout + check.stderr, check.stdout
    ok("render", profile, "--out", bundle, "--force")
    ok("lock", bundle, *PYPI)
    lock = json.loads((bundle / "envbuild.lock.json").read_text())
    assert lock["blender_devices"] == ["CPU", "CUDA"] and lock["blender_source"] == "pypi"
    context = root / "context"
    context.mkdir()
    shutil.copy(bundle / "envbuild.lock.json", context / "envbuild.lock.json")
    (context / "Dockerfile").write_text(
        f"FROM {blender_cpu.tag}\nCOPY envbuild.lock.json /etc/envbuild/envbuild.lock.json\n",
        encoding="utf-8",
    )
    with temporary_tag(docker_client, "blender-cuda") as tag:
        docker_client.images.build(path=str(context), tag=tag, rm=True, forcerm=True)
        yield tag


def test_blender_cpu_renders_inside_the_image(blender_cpu: Built, docker_client: Any, tmp_path: Path) -> None:
    lock = json.loads((blender_cpu.bundle / "envbuild.lock.json").read_text())
    assert (
        lock["resolved"] is True and lock["blender_source"] == "pypi" and lock["blender_version"] == "4.5.15"
    )
    locked = {d["name"]: d for d in lock["distributions"]}
    assert locked["bpy"]["version"] == "4.5.15"
    assert [f["filename"] for f in locked["bpy"]["files"]] == [
        "bpy-4.5.15-cp311-cp311-manylinux_2_28_x86_64.whl"
    ]
    assert (blender_cpu.bundle / "wheelhouse" / locked["bpy"]["files"][0]["filename"]).is_file()
    build_log = next(blender_cpu.bundle.glob("build-*.log")).read_text()
    install, _ = build_step(build_log, "-m venv /opt/venv")
    assert_installed_offline(install, docker_client, blender_cpu.tag)

    out = tmp_path / "runs"
    proc = envbuild("validate", "--image", blender_cpu.tag, "--out", out)
    assert proc.returncode == 0, proc.stderr
    run, report = only_run(out)
    status = {s["stage"]: s for s in report["stages"]}
    assert status["blender"]["status"] == "passed", status["blender"]
    facts = status["blender"]["facts"]
    assert facts["mode"] == "module" and facts["version"] == "4.5.15" and facts["declared"] == ["CPU"]
    assert facts["devices"]["CPU"]  # Blender's own device list
    (cpu,) = facts["renders"]
    assert cpu["device"] == "CPU" and cpu["status"] == "rendered" and cpu["image"] == "blender-cpu.png"
    assert cpu["std"] > 0.005 and 0 < cpu["mean"] < 1
    png = (run / "blender-cpu.png").read_bytes()
    assert png.startswith(PNG_MAGIC)
    manifest = (run / "MANIFEST.sha256").read_text()
    assert "  blender-cpu.png\n" in manifest
    md = (run / "report.md").read_text()
    assert "](blender-cpu.png)" in md and "## Blender" in md
    verify = envbuild("report", "verify", run)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    (run / "blender-cpu.png").write_bytes(png[:-1] + bytes([png[-1] ^ 1]))
    tampered = envbuild("report", "verify", run)
    assert tampered.returncode == 1 and "changed: blender-cpu.png" in tampered.stdout + tampered.stderr
    print(
        f"\nblender-cpu: bpy import {facts['import_s']} s, CPU render {cpu['render_s']} s "
        f"({facts['scene']['size']}x{facts['scene']['size']}, {facts['scene']['samples']} samples); "
        f"image {blender_cpu.size_bytes / 1e6:.0f} MB, built in {blender_cpu.build_s:.1f} s"
    )


def test_blender_cuda_declared_fails_at_the_blender_stage(blender_cuda: str, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    proc = envbuild("validate", "--image", blender_cuda, "--out", out)
    assert proc.returncode == 1, proc.stderr
    run, report = only_run(out)
    assert report["ok"] is False
    assert report["first_failure"]["stage"] == "blender"
    error = report["first_failure"]["error"]
    assert error.startswith("CUDA declared, but Blender sees no CUDA device"), error
    assert "no NVIDIA GPU is visible here" in error
    blender = next(s for s in report["stages"] if s["stage"] == "blender")
    assert "order a machine with an NVIDIA GPU" in blender["hint"]
    status = {s["stage"]: s["status"] for s in report["stages"]}
    assert status["packages"] == "passed" and status["accelerator"] in ("passed", "skipped")
    renders = {r["device"]: r for r in blender["facts"]["renders"]}
    assert renders["CPU"]["status"] == "rendered" and renders["CUDA"]["status"] == "unavailable"
    assert (run / "blender-cpu.png").is_file()  # the CPU reference is still in the report
    assert envbuild("report", "verify", run).returncode == 0
