"""``[python] build_from_source`` (issue 27): an sdist whose ``setup.py`` imports
``torch.utils.cpp_extension`` and builds a small C++ op, written here, served from a loopback index,
locked (its sdist and its build dependencies with their sha256), built in the builder stage of a real
image with CPU torch, installed in the final stage's venv, and imported and run by ``validate --image``
through ``[validate] extensions``.

The sdist (``eb-addop`` 1.0) is hand-written for this test: PKG-INFO 2.2 with a ``pyproject.toml``, so
the resolver reads its dependencies without building it.  Its package runs its op once on import, so
the validator's import of it runs the compiled code.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from build_support import envbuild, only_run, temporary_tag
from conftest import LOCK_SOURCES
from index_support import make_sdist, serve_index

REPO = Path(__file__).resolve().parent.parent
BASE_IMAGE = os.environ.get("ENVBUILD_TEST_BASE_IMAGE", "envbuild/debian:12")

SETUP_PY = """\
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(
    name="eb-addop",
    version="1.0",
    packages=["eb_addop"],
    ext_modules=[CppExtension("eb_addop._C", ["csrc/addop.cpp"])],
    cmdclass={"build_ext": BuildExtension},
)
"""
PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "eb-addop"
version = "1.0"
dependencies = ["torch"]
"""
ADDOP_CPP = """\
#include <torch/extension.h>

torch::Tensor add_one(torch::Tensor x) { return x + 1; }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("add_one", &add_one, "x + 1"); }
"""
INIT_PY = """\
import torch

from eb_addop import _C

__version__ = "1.0"


def add_one(x):
    return _C.add_one(x)


# Run the compiled op once on import: an import that succeeds has run it.
assert add_one(torch.zeros(3)).tolist() == [1.0, 1.0, 1.0]
"""


def make_addop(folder: Path) -> Path:
    return make_sdist(
        folder,
        "eb-addop",
        "1.0",
        setup_py=SETUP_PY,
        pyproject=PYPROJECT,
        requires=["torch"],
        files={"csrc/addop.cpp": ADDOP_CPP, "eb_addop/__init__.py": INIT_PY, "MANIFEST.in": "graft csrc\n"},
        metadata_version="2.2",
    )


def write_profile(folder: Path, build_from_source: list[str]) -> Path:
    """A profile extending pytorch-cpu, with its pilot app (whose checks it inherits) copied beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copytree(REPO / "profiles" / "apps" / "pilot", folder / "pilot")
    path = folder / "profile.toml"
    path.write_text(
        'name = "addop"\nkind = "pytorch"\nextends = "pytorch-cpu"\n'
        f'[python]\npackages = ["eb-addop==1.0"]\nbuild_from_source = {json.dumps(build_from_source)}\n'
        '[validate]\nextensions = ["eb_addop"]\ncompile_extensions = false\n[app]\nsource = "pilot"\n',
        encoding="utf-8",
    )
    return path


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


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.xdist_group("pytorch-cpu")
def test_source_build_in_the_builder_stage_validates_in_the_image(docker_client: Any, tmp_path: Path) -> None:
    make_addop(tmp_path / "index")
    bundle = tmp_path / "bundle"
    with serve_index(tmp_path / "index") as served:
        profile = write_profile(tmp_path / "profile", ["eb-addop"])
        for args in (
            ("render", profile, "--out", bundle),
            ("lock", bundle, *LOCK_SOURCES, "--index-url", f"{served}/simple/"),
            ("fetch", bundle, "--find-links", "/opt/wheels"),
        ):
            proc = envbuild(*args)
            assert proc.returncode == 0, f"{args[0]}: {proc.stdout}{proc.stderr}"
    assert (bundle / "wheelhouse" / "eb_addop-1.0.tar.gz").is_file()
    with temporary_tag(docker_client, "addop") as tag:
        proc = envbuild("build", bundle, "--tag", tag, "--base-image", BASE_IMAGE, "--quiet")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        log = (bundle / f"build-{tag.replace('/', '-').replace(':', '-')}.log").read_text()
        assert "Building wheel for eb-addop" in log or "Using cache" in log
        record = json.loads(next(bundle.glob("build-*.record.json")).read_text())
        (built,) = record["outputs"]["built_wheels"]
        assert built["file"].startswith("eb_addop-1.0-cp311-cp311-linux_x86_64")
        out = tmp_path / "runs"
        proc = envbuild("validate", "--image", tag, "--out", out)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        _run, report = only_run(out)
        parts = {p["name"]: p for s in report["stages"] if s["stage"] == "extensions" for p in s["parts"]}
        assert parts["import:eb_addop"]["status"] == "passed", parts
        # the build dependencies stayed out of the image
        listing = docker_client.containers.run(
            tag, ["/opt/venv/bin/python", "-m", "pip", "list", "--format", "json"], remove=True
        )
        names = {d["name"].lower() for d in json.loads(listing)}
        assert "eb-addop" in names and "ninja" not in names, names


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-n", "0"]))
