"""Issue 37: the workloads renters run resolve honestly (the lock side).

Real uv runs against a loopback index: torch's real dependency graph (tests/torch_universe.py, metadata
RECORDED from pypi.org in stand-in wheels) plus a small vLLM slice WRITTEN BY HAND here (not recorded),
modelling what the issue saw on the package index:

    vllm 0.34.0        cp38-abi3-manylinux_2_28 wheel: flashinfer-python==0.7.3 (not served), torch==2.14.1
    vllm 0.33.0        cp38-abi3-manylinux_2_28 wheel: flashinfer-python==0.7.2.post1, torch>=2.13.0,<=2.14.0
    vllm 0.2.2         py3-none-any wheel with old, loose dependencies (torch>=2.0)
    flashinfer-python  0.7.2.post1 and 0.7.4 (no 0.7.3), requires torch
    abi3pkg 1.0        cp38-abi3-manylinux_2_28 wheel: missingdep==1.0 (served by nobody); 0.9 sdist only
    srconly 1.0        sdist only
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from index_support import make_sdist, make_wheel
from lock_support import envbuild, h100_profile
from packaging.version import Version
from torch_universe import UniverseURLs, build_universe, serve_universe

from envbuild.lock.releases import series_behind, served
from envbuild.lock.target import Target
from envbuild.lock.uv import Sources

ABI3 = {"python_tag": "cp38", "abi_tag": "abi3", "platform_tag": "manylinux_2_28_x86_64"}


@pytest.fixture(scope="module")
def urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UniverseURLs]:
    universe = build_universe(tmp_path_factory.mktemp("honest-universe"))
    pypi = universe.pypi
    # Hand-written slice (see the module doc).
    make_wheel(pypi, "vllm", "0.34.0", requires=["flashinfer-python==0.7.3", "torch==2.14.1"], **ABI3)
    make_wheel(
        pypi, "vllm", "0.33.0", requires=["flashinfer-python==0.7.2.post1", "torch>=2.13.0,<=2.14.0"], **ABI3
    )
    make_wheel(pypi, "vllm", "0.2.2", requires=["torch>=2.0"])
    for version in ("0.7.2.post1", "0.7.4"):
        make_wheel(pypi, "flashinfer-python", version, requires=["torch"])
    make_wheel(pypi, "abi3pkg", "1.0", requires=["missingdep==1.0"], **ABI3)
    make_sdist(pypi, "abi3pkg", "0.9")
    make_sdist(pypi, "srconly", "1.0")
    with serve_universe(universe) as served_urls:
        yield served_urls


def profile(
    folder: Path, packages: list[str], *, torch: str | None = None, python: tuple[str, ...] = ()
) -> Path:
    """A pytorch profile for an H100, CPython 3.12, Ubuntu 24.04; torch.version only when given."""
    return h100_profile(
        folder,
        "[base]",
        'os = "ubuntu24.04"',
        packages=tuple(packages),
        torch=torch,
        kind="pytorch",
        name="honest",
        python=python,
    )


def check(env: dict[str, str], path: Path, url: str, *, expect: int) -> dict[str, Any]:
    """``check --json --resolve``; its exit status must be ``expect`` (0: ok, 1: error findings)."""
    done = envbuild(env, "check", path, "--json", "--resolve", "--index-url", url)
    assert done.returncode == expect, done.stdout + done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def codes(result: dict[str, Any]) -> dict[str, str]:
    return {f["code"]: f["message"] for f in result["findings"]}


def one_line(findings: dict[str, str]) -> None:
    for code, message in findings.items():
        assert "\n" not in message and "\r" not in message, (code, message)


def test_the_default_torch_yields_and_lock_says_why_the_newest_vllm_was_skipped(
    tmp_path: Path, urls: UniverseURLs, env: dict[str, str]
) -> None:
    """Before: the default torch==2.14.1 pin made uv take vllm 0.2.2 (or refuse with E-SOURCE-*)."""
    path = profile(tmp_path / "p", ["vllm"])
    bundle = tmp_path / "bundle"
    assert envbuild(env, "render", path, "--out", bundle).returncode == 0
    rendered = json.loads((bundle / "envbuild.lock.json").read_text())
    torch_line = next(line for line in rendered["declared"] if line["name"] == "torch")
    assert "default torch" in torch_line["origin"] and "torch.version (" not in torch_line["origin"]
    done = envbuild(env, "lock", bundle, "--index-url", urls.pypi, "--json")
    result = json.loads(done.stdout)
    found = codes(result)
    assert done.returncode == 0, found
    lock = json.loads((bundle / "envbuild.lock.json").read_text())
    dists = {d["name"]: d["version"] for d in lock["distributions"]}
    assert (dists["vllm"], dists["torch"], lock["torch_version"]) == ("0.33.0", "2.14.0", "2.14.0")
    assert "vllm 0.33.0 requires torch<=2.14.0" in found["I-TORCH-DEFAULT-YIELDED"]
    assert "torch>=" in found["I-TORCH-DEFAULT-YIELDED"] and "<=2.14.1" in found["I-TORCH-DEFAULT-YIELDED"]
    skipped = found["W-NEWEST-SKIPPED"]
    # uv's own explanation for vllm>=0.34.0 beside the locked torch, quoted on one line
    assert "is locked at 0.33.0, not 0.34.0" in skipped and "uv, asked for vllm>=0.34.0: Because" in skipped
    assert "vllm>=0.34.0 depends on" in skipped
    assert "required by flashinfer-python, vllm" in found["I-TORCH-DEFAULT-YIELDED"]
    assert not {c for c in found if c.startswith(("E-", "W-SOURCE"))}
    torch_line = next(line for line in lock["declared"] if line["name"] == "torch")
    assert "chosen by the resolver" in torch_line["origin"] and "vllm" in torch_line["origin"]
    one_line(found)


def test_a_declared_torch_that_conflicts_names_both_sides(
    tmp_path: Path, urls: UniverseURLs, env: dict[str, str]
) -> None:
    result = check(env, profile(tmp_path, ["vllm>=0.33"], torch="2.14.1"), urls.pypi, expect=1)
    found = codes(result)
    message = found["E-REQ-CONFLICT"]
    assert "vllm 0.33.0 requires torch<=2.14.0; the profile declares torch.version 2.14.1" in message
    assert "I-TORCH-DEFAULT-YIELDED" not in found  # a declared torch never yields
    one_line(found)


def test_a_pick_many_series_back_is_an_error_unless_bounded_or_allowed(
    tmp_path: Path, urls: UniverseURLs, env: dict[str, str]
) -> None:
    # Declared torch 2.14.1: uv can only take vllm 0.2.2, 2 served series behind 0.34.0.
    result = check(env, profile(tmp_path / "a", ["vllm"], torch="2.14.1"), urls.pypi, expect=1)
    found = codes(result)
    assert "E-OLD-RELEASE" in found, found
    assert "locked at 0.2.2, not 0.34.0" in found["E-OLD-RELEASE"]
    assert "flashinfer-python==0.7.3" in found["E-OLD-RELEASE"]  # uv's reason, quoted
    one_line(found)
    # Allowed by name: a warning with the same reason.
    allowed = profile(tmp_path / "b", ["vllm"], torch="2.14.1", python=('allow_old = ["vllm"]',))
    result = check(env, allowed, urls.pypi, expect=0)
    found = codes(result)
    assert "E-OLD-RELEASE" not in found and "locked at 0.2.2" in found["W-NEWEST-SKIPPED"]
    # Bounded by the profile: 0.2.2 is the newest its bound admits: nothing to say.
    result = check(env, profile(tmp_path / "c", ["vllm<0.3"], torch="2.14.1"), urls.pypi, expect=0)
    found = codes(result)
    assert "E-OLD-RELEASE" not in found and "W-NEWEST-SKIPPED" not in found


def test_source_only_only_when_the_needed_release_has_no_compatible_wheel(
    tmp_path: Path, urls: UniverseURLs, env: dict[str, str]
) -> None:
    # abi3pkg 1.0 has an abi3 wheel (its dependency is missing); 0.9 is sdist-only: a conflict, not source.
    result = check(env, profile(tmp_path / "a", ["abi3pkg"], torch="2.14.1"), urls.pypi, expect=1)
    found = codes(result)
    assert "E-SOURCE-ONLY" not in found and "E-SOURCE-NEEDS-TORCH" not in found
    assert "missingdep" in found["E-REQ-CONFLICT"]
    one_line(found)
    result = check(env, profile(tmp_path / "b", ["srconly"], torch="2.14.1"), urls.pypi, expect=1)
    assert "E-SOURCE-ONLY" in codes(result)


def test_served_releases_by_tag_compatibility(urls: UniverseURLs) -> None:
    target = Target(python_version="3.12", os="ubuntu24.04")
    sources = Sources((urls.pypi,))
    vllm = served("vllm", sources, target)
    # cp38-abi3-manylinux_2_28 installs on CPython 3.12, manylinux_2_39
    assert vllm.installable == tuple(Version(v) for v in ("0.2.2", "0.33.0", "0.34.0"))
    abi3pkg = served("abi3pkg", sources, target)
    assert abi3pkg.releases == (Version("0.9"), Version("1.0")) and abi3pkg.installable == (Version("1.0"),)
    # built from source: only the sdists count
    assert served("abi3pkg", sources, target, True).installable == (Version("0.9"),)
    # an older glibc target cannot take manylinux_2_28? It can (2.35 >= 2.28); CPython 3.7 cannot take cp38
    old = Target(python_version="3.7", os="ubuntu22.04")
    assert Version("1.0") not in served("abi3pkg", sources, old).installable
    releases = vllm.installable
    assert series_behind(Version("0.2.2"), Version("0.34.0"), releases) == 2
    assert series_behind(Version("0.33.0"), Version("0.34.0"), releases) == 1


def test_e_resolve_is_one_line(tmp_path: Path, env: dict[str, str]) -> None:
    path = profile(tmp_path / "p", ["vllm"], torch="2.14.1")
    done = envbuild(env, "check", path, "--resolve", "--index-url", "http://127.0.0.1:9/simple/")
    assert done.returncode == 3, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if "could not read an index" in line]
    assert lines and "Pass --index-url for a reachable mirror" in lines[0]  # the whole error on one line
