"""CUDA 13's compiler for the builder stage, locked from the package index (issue 35 item 1).

Real uv runs against a loopback index serving torch's recorded dependency graph (tests/torch_universe.py:
torch 2.14.1 requires ``cuda-toolkit[...]==13.0.3``, and cuda-toolkit 13.0.3's ``nvcc`` and ``cccl``
extras require nvidia-cuda-nvcc, -crt, nvidia-nvvm, nvidia-cuda-runtime and nvidia-cuda-cccl, whose
stand-in wheels are written there by hand, labelled).  ``envbuild lock`` pins them with their sha256 as
``role = "toolkit"`` in ``requirements-toolkit.txt``, never in ``requirements-rebuild.txt``; ``envbuild
fetch`` brings each file once; validate never expects them in the image.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from lock_support import envbuild
from lock_support import h100_profile as profile
from torch_universe import UniverseURLs, build_universe, serve_universe

from envbuild.models import LockedDistribution, read_lock

COMPILER = {"nvidia-cuda-nvcc", "nvidia-cuda-crt", "nvidia-nvvm", "nvidia-cuda-cccl"}


def requirement_specs(text: str) -> dict[str, list[str]]:
    """``name==version`` -> its sha256 hashes, from a hash-pinned requirements file."""
    found: dict[str, list[str]] = {}
    for block in text.replace("\\\n", " ").splitlines():
        words = block.split()
        if words and re.match(r"^[a-z0-9][a-z0-9.-]*==", words[0]):
            found[words[0]] = [w.removeprefix("--hash=sha256:") for w in words if w.startswith("--hash=")]
    return found


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory, torch_urls: UniverseURLs, env: dict[str, str]) -> Path:
    """A pytorch profile (torch 2.14.1, CUDA 13.0, H100; the CUDA probe op on) rendered and locked once."""
    tmp_path = tmp_path_factory.mktemp("toolkit")
    path = profile(tmp_path / "p", 'version = "13.0"', torch="2.14.1")
    bundle = tmp_path / "bundle"
    done = envbuild(env, "render", path, "--out", bundle)
    assert done.returncode == 0, done.stdout + done.stderr
    done = envbuild(env, "lock", bundle, "--index-url", torch_urls.pypi)
    assert done.returncode == 0, done.stdout + done.stderr
    return bundle


def test_lock_pins_the_compiler_wheels_in_the_toolkit_role(bundle: Path) -> None:
    lock = json.loads((bundle / "envbuild.lock.json").read_text())
    by_role: dict[str, dict[str, dict[str, Any]]] = {}
    for dist in lock["distributions"]:
        by_role.setdefault(dist["role"], {})[dist["name"]] = dist
    toolkit = by_role["toolkit"]
    # cuda-toolkit at the release torch 2.14.1 requires, its nvcc and cccl extras, and the runtime: the
    # prefix is whole, so what the image installs too is locked in both roles, the same files
    assert set(toolkit) == COMPILER | {"cuda-toolkit", "nvidia-cuda-runtime"}
    assert toolkit["cuda-toolkit"]["version"] == "13.0.3.0"
    nvcc, cccl = toolkit["nvidia-cuda-nvcc"], toolkit["nvidia-cuda-cccl"]
    assert (nvcc["version"], cccl["version"]) == ("13.0.88", "13.0.85")
    for name in ("cuda-toolkit", "nvidia-cuda-runtime"):
        assert toolkit[name]["files"] == by_role["install"][name]["files"]
    assert not COMPILER & set(by_role["install"])
    # requirements-toolkit.txt: every toolkit wheel with its sha256; requirements-rebuild.txt: none of the
    # compiler's
    specs = requirement_specs((bundle / "requirements-toolkit.txt").read_text())
    assert set(specs) == {f"{name}=={d['version']}" for name, d in toolkit.items()}
    for name, dist in toolkit.items():
        assert specs[f"{name}=={dist['version']}"] == [f["sha256"] for f in dist["files"]]
    rebuild = (bundle / "requirements-rebuild.txt").read_text()
    assert not [name for name in COMPILER if f"\n{name}==" in rebuild]
    assert "\ncuda-toolkit==13.0.3.0 \\" in rebuild  # torch's own dependency stays the image's
    # the files that follow the plan: the Dockerfile installs the file, the README says the release
    assert "COPY requirements-toolkit.txt" in (bundle / "Dockerfile").read_text()
    readme = (bundle / "README.md").read_text()
    assert "cuda-toolkit\\[nvcc,cccl\\]==13.0.3.0 (the release the resolved torch 2.14.1 requires)" in readme
    # validate expects none of the toolkit in the image
    read = read_lock(bundle / "envbuild.lock.json")
    in_image = {d.name for d in read.distributions if d.in_image}
    assert not COMPILER & in_image and {"cuda-toolkit", "nvidia-cuda-runtime"} <= in_image


def test_fetch_brings_every_locked_file_once(bundle: Path, env: dict[str, str]) -> None:
    done = envbuild(env, "fetch", bundle, "--no-tools")
    assert done.returncode == 0, done.stdout + done.stderr
    read = read_lock(bundle / "envbuild.lock.json")
    files = {f.filename for d in read.distributions for f in d.files}
    house = {p.name for p in (bundle / "wheelhouse").glob("*.whl")}
    assert house == files and any(name.startswith("nvidia_cuda_nvcc-13.0.88-") for name in house)
    assert f"fetching {len(files)} locked file(s)" in done.stderr


def test_a_newer_compiler_part_in_the_environment_leaves_the_toolkit_at_its_release(
    tmp_path: Path, torch_urls: UniverseURLs, env: dict[str, str]
) -> None:
    """The environment pins nvidia-nvvm at a release cuda-toolkit 13.0.3's nvcc extra excludes (vLLM's set
    brings nvidia-nvvm 13.5 beside torch's CUDA 13.0): the compiler lives in the builder's own prefix, so
    it keeps its nvvm and the image keeps the environment's; only the toolkit, the runtime and CCCL are
    shared."""
    path = profile(tmp_path / "p", 'version = "13.0"', torch="2.14.1", packages=("nvidia-nvvm==13.2.86",))
    bundle = tmp_path / "bundle"
    assert envbuild(env, "render", path, "--out", bundle).returncode == 0
    done = envbuild(env, "lock", bundle, "--index-url", torch_urls.pypi)
    assert done.returncode == 0, done.stdout + done.stderr
    nvvm = {
        d.role: d.version
        for d in read_lock(bundle / "envbuild.lock.json").distributions
        if d.name == "nvidia-nvvm"
    }
    assert nvvm == {"install": "13.2.86", "toolkit": "13.0.88"}


def test_a_toolkit_that_does_not_resolve_stops_the_lock_naming_the_way_out(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """The index lacks the nvvm cuda-toolkit 13.0.3's nvcc extra pins (this test deletes its stand-in
    wheel): the environment resolves, its compiler does not, and nothing is written."""
    universe = build_universe(tmp_path / "universe")
    (missing,) = universe.pypi.rglob("nvidia_nvvm-13.0.88-*.whl")
    missing.unlink()
    path = profile(tmp_path / "p", 'version = "13.0"', torch="2.14.1")
    bundle = tmp_path / "bundle"
    assert envbuild(env, "render", path, "--out", bundle).returncode == 0
    before = (bundle / "envbuild.lock.json").read_bytes()
    with serve_universe(universe) as urls:
        done = envbuild(env, "lock", bundle, "--index-url", urls.pypi)
    assert done.returncode == 1, done.stdout + done.stderr
    (line,) = [x for x in done.stdout.splitlines() if "E-TOOLKIT-UNRESOLVED" in x]
    assert "cuda-toolkit[nvcc,cccl]==13.0.3.0 (the release torch requires)" in line, line
    assert "nvidia-nvvm" in line, line
    assert 'base.builder = "devel-image"' in done.stdout
    assert (bundle / "envbuild.lock.json").read_bytes() == before
    assert not (bundle / "requirements-toolkit.txt").exists()


def _dist(name: str, role: str) -> LockedDistribution:
    return LockedDistribution(name=name, version="1", files=(), role=role)  # type: ignore[arg-type]


def test_the_toolkit_is_never_expected_in_the_image() -> None:
    assert [_dist("x", role).in_image for role in ("install", "source", "build", "toolkit")] == [
        True,
        True,
        False,
        False,
    ]
