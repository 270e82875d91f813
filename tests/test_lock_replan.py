"""The resolved set decides the plan (issue 22): real uv runs against a loopback index serving torch's
real dependency graph (tests/torch_universe.py: metadata RECORDED from pypi.org, in stand-in wheels;
the variant index and ``pinstorch`` are written by hand, as labelled there).

Each test renders or checks a small profile for an H100 (CPython 3.12, Ubuntu 24.04) and asserts what
the plan says before and after resolution: torch's version and build, CUDA, the base image and the
driver floor, and what lock writes into the bundle.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from lock_support import envbuild
from lock_support import h100_profile as profile
from torch_universe import UniverseURLs

from envbuild.models import LockedDistribution, LockedFile
from envbuild.plan import check
from envbuild.plan.resolved import ResolvedTorch, torch_from
from envbuild.profile import load_profile


@pytest.fixture(scope="module")
def urls(torch_urls: UniverseURLs) -> UniverseURLs:
    """The torch universe, served (``torch_urls`` of tests/conftest.py)."""
    return torch_urls


def check_json(env: dict[str, str], path: Path, *args: str, expect: int) -> dict[str, Any]:
    """``check --json``; its exit status must be ``expect`` (0: ok, 1: error findings)."""
    done = envbuild(env, "check", path, "--json", *args)
    assert done.returncode == expect, done.stdout + done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def codes(result: dict[str, Any]) -> dict[str, str]:
    return {f["code"]: f["message"] for f in result["findings"]}


def test_bare_torch_line_the_resolved_cuda_decides_and_an_old_driver_is_refused(
    tmp_path: Path, urls: UniverseURLs, env: dict[str, str]
) -> None:
    path = profile(tmp_path, packages=("torch==2.15.0",))
    # Before resolution (issue 37): the exact pin is the plan's torch, read against the catalog: cu132,
    # CUDA 13.2, so plain check already refuses the driver, naming the floor.
    before = check_json(env, path, "--driver", "560.35.05", expect=1)
    assert not before["ok"]
    assert (before["plan"]["torch_version"], before["plan"]["accelerator_version"]) == ("2.15.0", "13.2")
    assert "560.35.05" in codes(before)["E-DRIVER-TOO-OLD"]
    assert "W-DRIVER-PROVISIONAL" not in codes(before)
    # Resolved: torch 2.15.0 requires cuda-toolkit 13.2.2 (recorded), which agrees.
    after = check_json(env, path, "--driver", "560.35.05", "--resolve", "--index-url", urls.pypi, expect=1)
    plan, found = after["plan"], codes(after)
    assert not after["ok"]
    assert (plan["torch_version"], plan["torch_variant"], plan["accelerator_version"]) == (
        "2.15.0",
        "cu132",
        "13.2",
    )
    assert "13.2" in plan["base_image"] and plan["min_driver"] == before["plan"]["min_driver"]
    assert "cuda-toolkit 13.2.2" in found["I-VARIANT-RESOLVED"]
    assert "560.35.05" in found["E-DRIVER-TOO-OLD"] and plan["min_driver"] in found["E-DRIVER-TOO-OLD"]
    assert "W-DRIVER-PROVISIONAL" not in found
    # The pin follows the index: the default build has no local tag.
    assert [p["version"] + (p["local"] or "") for p in plan["pins"] if p["name"] == "torch"] == ["2.15.0"]


def test_a_dependencys_torch_pin_decides_and_lock_rewrites_the_bundle(
    tmp_path: Path, urls: UniverseURLs, env: dict[str, str]
) -> None:
    path = profile(tmp_path / "p", packages=("pinstorch",))
    bundle = tmp_path / "bundle"
    done = envbuild(env, "render", path, "--out", bundle)
    assert done.returncode == 0, done.stderr
    rendered = json.loads((bundle / "envbuild.lock.json").read_text())
    assert rendered["accelerator_version"] == "12.6" and rendered["torch_version"] is None
    done = envbuild(env, "lock", bundle, "--index-url", urls.pypi)
    assert done.returncode == 0, done.stdout + done.stderr
    lock = json.loads((bundle / "envbuild.lock.json").read_text())
    assert (lock["torch_version"], lock["torch_variant"], lock["accelerator_version"]) == (
        "2.14.0",
        "cu130",
        "13.0",
    )
    assert lock["resolved"] is True and lock["min_driver"] != rendered["min_driver"]
    dists = {d["name"]: d for d in lock["distributions"]}
    assert dists["torch"]["required_by"] == ["pinstorch"] and dists["cuda-toolkit"]["version"] == "13.0.3.0"
    # Every file that follows the plan says the same: the Dockerfile's base, the README's driver.
    assert f'ARG BASE_IMAGE="{lock["base_image"]}"' in (bundle / "Dockerfile").read_text()
    assert lock["min_driver"] in (bundle / "README.md").read_text()
    assert "torch==2.14.0 \\" in (bundle / "requirements-rebuild.txt").read_text()


def test_torch_table_on_a_variant_index_keeps_the_local_tag(
    tmp_path: Path, urls: UniverseURLs, env: dict[str, str]
) -> None:
    path = profile(tmp_path, 'version = "13.0"', torch="2.14.1")
    result = check_json(
        env, path, "--resolve", "--index-url", urls.variants, "--index-url", urls.pypi, expect=0
    )
    pins = {p["name"]: p for p in result["plan"]["pins"]}
    assert pins["torch"]["local"] == "cu130" and result["plan"]["accelerator_version"] == "13.0"
    assert "I-INDEX-DEFAULT-BUILD" not in codes(result)


def test_torch_table_on_a_variantless_index_pins_the_default_build(
    tmp_path: Path, urls: UniverseURLs, env: dict[str, str]
) -> None:
    """The package index (and its mirrors) serve torch 2.14.1 without +cu130: pinned without the tag."""
    path = profile(tmp_path / "p", 'version = "13.0"', torch="2.14.1")
    bundle = tmp_path / "bundle"
    assert envbuild(env, "render", path, "--out", bundle).returncode == 0
    done = envbuild(env, "lock", bundle, "--index-url", urls.pypi)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "E-REQ-CONFLICT" not in done.stdout + done.stderr and "I-INDEX-DEFAULT-BUILD" in done.stdout
    text = (bundle / "requirements-rebuild.txt").read_text()
    assert "torch==2.14.1 \\" in text and "+cu130" not in text
    lock = json.loads((bundle / "envbuild.lock.json").read_text())
    assert lock["torch_variant"] == "cu130" and lock["accelerator_version"] == "13.0"


def test_a_variant_the_index_does_not_serve_is_named_with_the_ways_out(
    tmp_path: Path, urls: UniverseURLs, env: dict[str, str]
) -> None:
    cpu = profile(tmp_path / "cpu", torch="2.14.1")
    cpu.write_text(
        cpu.read_text()
        .replace('backend = "cuda"', 'backend = "cpu"')
        .replace('targets = ["h100"]', "targets = []")
    )
    result = check_json(env, cpu, "--resolve", "--index-url", urls.pypi, expect=1)
    found = codes(result)
    assert "E-REQ-CONFLICT" not in found
    message = found["E-VARIANT-NOT-SERVED"]
    assert "torch 2.14.1+cpu" in message and "default build" in message
    assert "download.pytorch.org/whl/cpu" in message and "--find-links" in message
    # The same profile against the index that serves +cpu resolves, and never adopts the CUDA build.
    served = check_json(
        env, cpu, "--resolve", "--index-url", urls.variants, "--index-url", urls.pypi, expect=0
    )
    assert {p["name"]: p["local"] for p in served["plan"]["pins"]}["torch"] == "cpu"
    # A declared CUDA version the index does not serve: not adopted, and the served default is named.
    cu126 = profile(tmp_path / "cu126", 'version = "12.6"', torch="2.14.1")
    result = check_json(env, cu126, "--resolve", "--index-url", urls.pypi, expect=1)
    assert 'accelerator.version = "13.0"' in codes(result)["E-VARIANT-NOT-SERVED"]


def test_a_declared_cuda_version_with_an_exact_torch_pin_plans_that_build(
    tmp_path: Path, urls: UniverseURLs, env: dict[str, str]
) -> None:
    """accelerator.version 12.6 with torch==2.15.0 in the requirements: the exact pin is read before
    resolution (issue 37), torch 2.15.0 publishes cu126, so the plan is its cu126 build, which the package
    index (default builds, cu132) does not serve: the PyTorch cu126 index is named as the way out."""
    path = profile(tmp_path, 'version = "12.6"', packages=("torch==2.15.0",))
    result = check_json(env, path, "--resolve", "--index-url", urls.pypi, expect=1)
    message = codes(result)["E-VARIANT-NOT-SERVED"]
    assert "torch 2.15.0+cu126" in message and "(cu132)" in message
    assert "download.pytorch.org/whl/cu126" in message
    assert result["plan"]["accelerator_version"] == "12.6"


def _dist(
    name: str, version: str, local: str | None = None, required_by: tuple[str, ...] = ()
) -> LockedDistribution:
    wheel = LockedFile(filename=f"{name}-{version}-py3-none-any.whl", url="", sha256="0" * 64)
    return LockedDistribution(
        name=name, version=version, local=local, files=(wheel,), required_by=required_by
    )


def test_the_build_of_the_resolved_torch() -> None:
    """Local tag first, then torch's own CUDA dependency (the default build has no tag), else CPU."""
    tagged = torch_from([_dist("torch", "2.14.1", "cu130")])
    assert tagged is not None and (tagged.variant, tagged.local) == ("cu130", "cu130")
    default = torch_from([_dist("torch", "2.15.0"), _dist("cuda-toolkit", "13.2.2", required_by=("torch",))])
    assert default is not None and (default.variant, default.local, default.cuda) == ("cu132", None, "13.2")
    assert "cuda-toolkit 13.2.2" in default.evidence
    old = torch_from(
        [_dist("torch", "2.7.1"), _dist("nvidia-cuda-runtime-cu12", "12.6.77", required_by=("torch",))]
    )
    assert old is not None and old.variant == "cu126"
    cpu = torch_from([_dist("torch", "2.15.0")])
    assert cpu is not None and cpu.variant == "cpu"
    assert torch_from([_dist("numpy", "2.2.6")]) is None


def test_a_dependencys_torch_the_catalog_lacks_is_a_warning_naming_the_refresh(tmp_path: Path) -> None:
    loaded = load_profile(str(profile(tmp_path, packages=("pinstorch",))))
    resolved = ResolvedTorch(
        version="2.16.0", local=None, variant="cu132", evidence="test", brought_by=("pinstorch",)
    )
    result = check(loaded, resolved=resolved)
    found = {f.code: f.message for f in result.findings}
    assert "envbuild catalog refresh" in found["W-TORCH-UNCATALOGED"]
    assert (result.plan.torch_version, result.plan.accelerator_version) == ("2.16.0", "13.2")
    assert result.plan.min_driver is not None and "13.2" in result.plan.base_image
