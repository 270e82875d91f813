"""``[python] build_from_source`` (issue 27): an sdist whose ``setup.py`` imports
``torch.utils.cpp_extension`` and builds a small C++ op (``eb-addop``, hand-written: tests/addop_support.py),
served from a loopback index, locked (its sdist and its build dependencies with their sha256), built in the
builder stage of a real image with CPU torch, installed in the final stage's venv, and imported and run by
``validate --image`` through ``[validate] extensions``.

The image is the shared pytorch-cpu one (the fixture ``pytorch_cpu`` in tests/conftest.py: the built-in
profile plus this sdist), whose validation in tests/test_e2e.py imports the module; its rebuild without the
cache (``pytorch_cpu_rebuilt``) shows the kept wheel copied in instead of a second compile.  A failing source
build makes ``envbuild build``
fail, naming the step, the compiler's first error and the full log: shown on a small image (a ``custom``
profile without torch, a C extension sdist ``eb-cop`` whose C does not compile), since what names the
failure (the source-build step, the compiler's error line, the log) does not depend on torch, and a torch
image's venv would be installed again for it (about 240 s on 2 loaded CPUs).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest
from addop_support import make_addop, write_profile
from build_support import Built, Rebuilt, build_step, committed_images, envbuild, minimal_wheel, temporary_tag
from conftest import LOCK_SOURCES
from index_support import make_sdist, serve_index, setuptools_pyproject

from envbuild.image.refs import slug

REPO = Path(__file__).resolve().parent.parent
BASE_IMAGE = os.environ.get("ENVBUILD_TEST_BASE_IMAGE", "envbuild/debian:12")


def lock_of(bundle: Path) -> dict[str, Any]:
    return json.loads((bundle / "envbuild.lock.json").read_text(encoding="utf-8"))


def test_lock_takes_only_the_listed_sdist_and_its_build_dependencies(tmp_path: Path) -> None:
    make_addop(tmp_path / "index")
    with serve_index(tmp_path / "index") as served:
        bundle = tmp_path / "bundle"
        profile = write_profile(tmp_path / "profile", ["EB_AddOp"])
        assert envbuild("render", profile, "--out", bundle).returncode == 0
        proc = envbuild("lock", bundle, *LOCK_SOURCES, "--index-url", f"{served}/simple/")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lock = lock_of(bundle)
    assert lock["build_from_source"] == ["eb-addop"]
    roles = {d["name"]: d["role"] for d in lock["distributions"]}
    assert roles["eb-addop"] == "source" and roles["torch"] == "install"
    # ninja (cpp_extension) is built with only; setuptools (pyproject) is torch's dependency, installed anyway
    assert roles["ninja"] == "build" and roles["setuptools"] == "install"
    (sdist,) = next(d for d in lock["distributions"] if d["name"] == "eb-addop")["files"]
    assert sdist["filename"] == "eb_addop-1.0.tar.gz" and re.fullmatch(r"[0-9a-f]{64}", sdist["sha256"])
    # every other distribution is a wheel
    assert all(
        f["filename"].endswith(".whl")
        for d in lock["distributions"]
        if d["role"] != "source"
        for f in d["files"]
    )
    rebuild = (bundle / "requirements-rebuild.txt").read_text()
    assert "\neb-addop==" not in rebuild and "\nninja==" not in rebuild
    source = (bundle / "requirements-source.txt").read_text()
    assert f"eb-addop==1.0 \\\n    --hash=sha256:{sdist['sha256']}" in source
    assert "\nninja==" in (bundle / "requirements-build.txt").read_text()
    dockerfile = (bundle / "Dockerfile").read_text()
    assert "pip wheel --no-cache-dir --no-deps --no-build-isolation --require-hashes" in dockerfile
    assert "ARG MAX_JOBS=1" in dockerfile and "FLASH_ATTENTION_FORCE_BUILD=TRUE" in dockerfile
    script = (REPO / "envbuild" / "payloads" / "built_key.py").read_bytes()
    assert (bundle / "envbuild-source-build.py").read_bytes() == script


@pytest.mark.parametrize(
    ("listed", "code"),
    [(["not-there"], "E-SOURCE-NOT-RESOLVED"), (["numpy"], "W-SOURCE-HAS-WHEEL")],
    ids=["not-resolved", "has-wheel"],
)
def test_lock_judges_the_listed_names(tmp_path: Path, listed: list[str], code: str) -> None:
    make_addop(tmp_path / "index")
    with serve_index(tmp_path / "index") as served:
        bundle = tmp_path / "bundle"
        profile = write_profile(tmp_path / "profile", ["eb-addop", *listed])
        assert envbuild("render", profile, "--out", bundle).returncode == 0
        proc = envbuild("lock", bundle, *LOCK_SOURCES, "--index-url", f"{served}/simple/")
    assert f": {code}: profile 'addop': python.build_from_source " in proc.stdout, proc.stdout + proc.stderr
    assert proc.returncode == (1 if code.startswith("E-") else 0)


def test_a_bad_name_is_refused_with_its_key(tmp_path: Path) -> None:
    profile = write_profile(tmp_path / "profile", ["flash attn"])
    proc = envbuild("check", profile)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert (
        "python.build_from_source" in proc.stderr and "'flash attn' is not a distribution name" in proc.stderr
    )


def gpu_profile(folder: Path, extends: str, os_id: str, builder: str | None = None) -> Path:
    """A profile extending a GPU one (built-in pytorch, or the golden ROCm fixture) with a source build;
    ``builder``: its ``base.builder``."""
    folder.mkdir(parents=True, exist_ok=True)
    if extends.endswith(".toml"):  # a fixture, copied beside (extends takes a relative path)
        shutil.copy(REPO / extends, folder)
        extends = Path(extends).name
    path = folder / "profile.toml"
    chosen = f'builder = "{builder}"\n' if builder else ""
    python = 'version = "3.11"\n' if os_id == "debian12" else ""  # Debian 12's own Python
    path.write_text(
        f'name = "gpu-addop"\nkind = "pytorch"\nextends = "{extends}"\n[base]\nos = "{os_id}"\n{chosen}'
        f'[python]\n{python}packages = ["eb-addop==1.0"]\nbuild_from_source = ["eb-addop"]\n',
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize(
    ("extends", "builder", "final", "option"),
    [
        (
            "pytorch",
            "nvidia/cuda:13.0.2-devel-ubuntu24.04",
            "nvidia/cuda:13.0.2-base-ubuntu24.04",
            "devel-image",
        ),
        ("tests/golden/_profiles/pytorch-rocm.toml", "-complete", "rocm/dev-ubuntu-24.04:", None),
    ],
    ids=["cuda-devel-image", "rocm"],
)
def test_a_gpu_source_build_compiles_on_the_devel_image_and_ships_on_the_base(
    tmp_path: Path, extends: str, builder: str, final: str, option: str | None
) -> None:
    profile = gpu_profile(tmp_path / "profile", extends, "ubuntu24.04", option)
    proc = envbuild("render", profile, "--out", tmp_path / "bundle")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "I-BUILDER-DERIVED" in proc.stdout, proc.stdout
    dockerfile = (tmp_path / "bundle" / "Dockerfile").read_text()
    (builder_arg,) = re.findall(r"^ARG BUILDER_IMAGE=(.*)$", dockerfile, re.M)
    (base_arg,) = re.findall(r"^ARG BASE_IMAGE=(.*)$", dockerfile, re.M)
    assert builder in builder_arg and final in base_arg and builder_arg != base_arg
    assert "\nFROM ${BUILDER_IMAGE} AS builder\n" in dockerfile
    # the final stage (the last FROM) is on the base image
    assert re.findall(r"^FROM (\S+)", dockerfile, re.M)[-1] == "${BASE_IMAGE}"
    # the README's CI workflow keeps the built wheels between runs
    readme = (tmp_path / "bundle" / "README.md").read_text()
    assert "${{ env.BUNDLE }}/built-wheels\n            ${{ env.BUNDLE }}/build-*.record.json" in readme


def test_a_cuda_13_source_build_compiles_with_the_package_indexs_nvcc_on_debian12(tmp_path: Path) -> None:
    """No nvidia/cuda devel image exists for debian12: CUDA 13's nvcc comes from the package index, into the
    builder's own prefix, set for the source build's RUN line only (issue 35)."""
    profile = gpu_profile(tmp_path / "profile", "pytorch", "debian12")
    proc = envbuild("render", profile, "--out", tmp_path / "b")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "I-BUILDER-TOOLKIT-WHEELS" in proc.stdout and "E-SOURCE-NO-DEVEL-IMAGE" not in proc.stdout
    dockerfile = (tmp_path / "b" / "Dockerfile").read_text()
    assert "ARG BUILDER_IMAGE" not in dockerfile and "\nFROM ${BASE_IMAGE} AS builder\n" in dockerfile
    (run,) = [line for line in dockerfile.splitlines() if line.startswith("RUN export MAX_JOBS=")]
    assert " CUDA_HOME=/opt/envbuild-cuda/nvidia/cu13 " in run
    assert " LIBRARY_PATH=/opt/envbuild-cuda/link:/opt/envbuild-cuda/nvidia/cu13/lib " in run


def test_a_cuda_source_build_is_refused_where_the_devel_image_it_asks_for_is_missing(tmp_path: Path) -> None:
    proc = envbuild("check", gpu_profile(tmp_path / "profile", "pytorch", "debian12", "devel-image"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (line,) = [x for x in proc.stdout.splitlines() if "E-SOURCE-NO-DEVEL-IMAGE" in x]
    assert "no CUDA 13.0.2 devel image for debian12" in line and "ubuntu22.04, ubuntu24.04" in line, line
    assert 'base.builder = "devel-image" asks for it' in line and 'or base.builder = "auto"' in line, line


def test_the_builder_reuses_a_built_wheel_only_for_the_same_key(tmp_path: Path) -> None:
    """envbuild-source-build.py as the builder stage runs it (a subprocess, real files): ``record``
    writes the key beside a wheel just built, ``reuse`` takes it back while the key holds, and builds
    again when the arch list changes or the wheel's bytes no longer match its record."""
    script = REPO / "envbuild" / "payloads" / "built_key.py"
    source = tmp_path / "requirements-source.txt"
    source.write_text("--require-hashes\n\neb-addop==1.0 \\\n    --hash=sha256:" + "ab" * 32 + "\n")
    first = tmp_path / "first"
    first.mkdir()
    # as pip wheel left it
    minimal_wheel(first / "eb_addop-1.0-cp311-cp311-linux_x86_64.whl", "eb-addop", "1.0")
    common = ["--source", str(source), "--todo", str(tmp_path / "todo.txt")]

    def run(action: str, folder: Path, *more: str, env: dict[str, str] | None = None) -> str:
        args = [sys.executable, str(script), action, "--built", str(folder), *more, *common]
        proc = subprocess.run(args, capture_output=True, text=True, env={**os.environ, **(env or {})})
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    run("record", first)
    (record,) = first.glob("*.envbuild-key.json")
    key = json.loads(record.read_text())["key"]
    assert key["sdist_sha256"] == ["ab" * 32] and key["compilers"][0].startswith("c++: ")
    assert run("reuse", tmp_path / "second", "--cache", str(first)).startswith(
        "envbuild-source-build: cached eb-addop==1.0: eb_addop-1.0-cp311-cp311-linux_x86_64.whl"
    )
    assert (tmp_path / "todo.txt").read_text() == "--require-hashes\n"
    assert (tmp_path / "second" / "eb_addop-1.0-cp311-cp311-linux_x86_64.whl").is_file()
    other = run("reuse", tmp_path / "third", "--cache", str(first), env={"TORCH_CUDA_ARCH_LIST": "9.0"})
    assert other.startswith("envbuild-source-build: building eb-addop==1.0: no cached wheel")
    assert (tmp_path / "todo.txt").read_text().endswith("eb-addop==1.0 --hash=sha256:" + "ab" * 32 + "\n")
    (first / "eb_addop-1.0-cp311-cp311-linux_x86_64.whl").write_bytes(b"changed")
    assert "does not match its key record" in run("reuse", tmp_path / "fourth", "--cache", str(first))


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.xdist_group(
    "pytorch-cpu"
)  # the shared image (tests/conftest.py) holds eb-addop built from source
def test_source_build_in_the_builder_stage_and_its_kept_wheel(
    pytorch_cpu: Built, pytorch_cpu_rebuilt: Rebuilt, docker_client: Any, tmp_path: Path
) -> None:
    """The shared pytorch-cpu image built eb-addop in its builder stage (its import in the image, which
    runs the op, is judged by tests/test_e2e.py's validation of that image); here: the step, the record,
    the kept wheel and its key, and the rebuild without the cache that copied the kept wheel in."""
    bundle = pytorch_cpu.bundle
    log = (bundle / f"build-{slug(pytorch_cpu.tag)}.log").read_text()
    # the wheel the step built is in the record and in the image (below), from the cache too; a step that
    # ran also says so in the log
    step, cached = build_step(log, "envbuild-source-build.py reuse")
    assert cached or "Building wheel for eb-addop" in step, step
    record = json.loads((bundle / f"build-{slug(pytorch_cpu.tag)}.record.json").read_text())
    (built,) = record["outputs"]["built_wheels"]
    assert built["file"].startswith("eb_addop-1.0-cp311-cp311-linux_x86_64")
    # the build dependencies stayed out of the image
    listing = docker_client.containers.run(
        pytorch_cpu.tag, ["/opt/venv/bin/python", "-m", "pip", "list", "--format", "json"], remove=True
    )
    names = {d["name"].lower() for d in json.loads(listing)}
    assert "eb-addop" in names and "ninja" not in names, names
    # the built wheel was kept beside the wheelhouse, with its key record
    house = bundle / "built-wheels"
    assert hashlib.sha256((house / built["file"]).read_bytes()).hexdigest() == built["sha256"]
    key = json.loads((house / f"{built['file']}.envbuild-key.json").read_text())["key"]
    assert key["torch"].endswith("+cpu") and key["python"] == "3.11", key
    # the rebuild without the cache, from a copy of the bundle (kept wheel included), copied the kept
    # wheel in: pip wheel did not run
    rebuilt = pytorch_cpu_rebuilt.log
    assert rebuilt, pytorch_cpu_rebuilt.proc.stderr[-3000:]
    assert f"envbuild-source-build: cached eb-addop==1.0: {built['file']} has the same key" in rebuilt
    lines = [line.strip() for line in rebuilt.splitlines()]
    assert "envbuild-source-build: start" not in lines and "Building wheel" not in rebuilt
    assert f"envbuild-built-wheel: {built['sha256']}  {built['file']}" in rebuilt
    # a kept wheel changed after its export is refused before the engine is asked (in a copy of the
    # bundle: the shared one stays as built; the wheelhouse linked, the kept wheels copied)
    copy = tmp_path / "changed"
    shutil.copytree(bundle, copy, copy_function=os.link, ignore=shutil.ignore_patterns("built-wheels"))
    shutil.copytree(house, copy / "built-wheels")
    (copy / "built-wheels" / built["file"]).write_bytes(b"changed")
    proc = envbuild("build", copy, "--tag", "envbuild-test/never:built", "--quiet")
    assert proc.returncode == 1 and f"its key record {built['file']}.envbuild-key.json says" in proc.stderr


# A C extension without torch, whose C does not compile (an undeclared identifier): the failing build.
COP_SETUP_PY = """\
from setuptools import Extension, setup

setup(name="eb-cop", version="1.0", packages=["eb_cop"], ext_modules=[Extension("eb_cop._c", ["csrc/cop.c"])])
"""
COP_PYPROJECT = setuptools_pyproject("eb-cop", "1.0")
BROKEN_COP_C = """\
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *add_one(PyObject *self, PyObject *x) { return PyNumber_Add(x, eb_not_declared); }
static PyMethodDef methods[] = {{"add_one", add_one, METH_O, "x + 1"}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_c", NULL, -1, methods};
PyMODINIT_FUNC PyInit__c(void) { return PyModule_Create(&module); }
"""


def fetched_broken_cop(tmp_path: Path) -> Path:
    """A ``custom`` profile on the local Debian 12 base building ``eb-cop`` from source (plus ``six``, a
    wheel, so the venv's install installs something), rendered, locked against pypi.org and the loopback
    index, and fetched."""
    make_sdist(
        tmp_path / "index",
        "eb-cop",
        "1.0",
        setup_py=COP_SETUP_PY,
        pyproject=COP_PYPROJECT,
        files={"csrc/cop.c": BROKEN_COP_C, "MANIFEST.in": "graft csrc\n"},
        metadata_version="2.2",
    )
    profile = tmp_path / "profile" / "profile.toml"
    profile.parent.mkdir(parents=True)
    profile.write_text(
        f'name = "cop"\nkind = "custom"\n[base]\nos = "debian12"\nimage = "{BASE_IMAGE}"\n'
        '[python]\nversion = "3.11"\npackages = ["eb-cop==1.0", "six"]\nbuild_from_source = ["eb-cop"]\n',
        encoding="utf-8",
    )
    bundle = tmp_path / "bundle"
    with serve_index(tmp_path / "index") as served:
        for args in (
            ("render", profile, "--out", bundle),
            ("lock", bundle, "--index-url", "https://pypi.org/simple", "--index-url", f"{served}/simple/"),
            ("fetch", bundle, "--no-tools"),
        ):
            proc = envbuild(*args)
            assert proc.returncode == 0, f"{args[0]}: {proc.stdout}{proc.stderr}"
    assert (bundle / "wheelhouse" / "eb_cop-1.0.tar.gz").is_file()
    assert lock_of(bundle)["build_from_source"] == ["eb-cop"]
    return bundle


@pytest.mark.docker
@pytest.mark.slow
def test_a_failing_source_build_names_the_step_the_compiler_error_and_the_log(
    docker_client: Any, tmp_path: Path
) -> None:
    """A source build whose C does not compile (an undeclared identifier): `envbuild build` exits 1
    naming the source-build step, the compiler's first error (file:line:col) and the full log."""
    bundle = fetched_broken_cop(tmp_path)
    with temporary_tag(docker_client, "cop-broken") as tag:
        try:
            proc = envbuild("build", bundle, "--tag", tag, "--base-image", BASE_IMAGE, "--quiet")
        finally:
            logs = list(bundle.glob("build-*.log"))
            for image in committed_images(logs[0].read_text()) if logs else []:
                with suppress(Exception):  # the layers this build made (the cached ones stay), untagged
                    if not docker_client.images.get(image).tags:
                        docker_client.images.remove(image, noprune=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    err = proc.stderr
    # no traceback of envbuild's own (the quoted tail of pip's output, "  | ...", may hold pip's)
    assert not [line for line in err.splitlines() if "Traceback" in line and not line.startswith("  | ")]
    step = re.search(r"^envbuild: error: build failed at step \d+/\d+: (RUN export MAX_JOBS=.*)$", err, re.M)
    assert step, err
    assert "envbuild-source-build.py reuse" in step.group(1) and "pip wheel" in step.group(1), step.group(1)
    first = re.search(r"^first compiler error: (\S*csrc/cop\.c:\d+:\d+: error: .*)$", err, re.M)
    assert first and "eb_not_declared" in first.group(1), err
    full = re.search(r"^full log: (.+)$", err, re.M)
    assert full and Path(full.group(1)).is_file(), err
    assert "eb_not_declared" in Path(full.group(1)).read_text()
    assert not list((bundle / "built-wheels").glob("*.whl"))  # nothing built, nothing kept


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-n", "0"]))
