"""Issue 37 item 3: an exact ``torch==X`` in the declared requirements (profile packages or a requirements
file) is read into the plan before resolution, against the catalog (envbuild/data/torch.toml): plain
``check`` (no --resolve) judges its CUDA's driver floor and whether the release exists.  Before, both
profiles below got ``ok``.  Profiles are written by hand for these tests."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_support import envbuild

from envbuild.catalog import load_catalog

REPO = Path(__file__).resolve().parent.parent


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return envbuild(*args, cwd=REPO)


def profile(tmp_path: Path, packages: str = "", requirements: str | None = None) -> str:
    text = (
        'name = "pinned"\nkind = "pytorch"\n[base]\nos = "ubuntu24.04"\n'
        '[accelerator]\nbackend = "cuda"\ntargets = ["h100"]\n'
        f'[python]\nversion = "3.12"\npackages = [{packages}]\n'
    )
    if requirements is not None:
        (tmp_path / "requirements.txt").write_text(requirements, encoding="utf-8")
        text += 'requirements = ["requirements.txt"]\n'
    path = tmp_path / "pinned.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def findings(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    return {f["code"]: f["message"] for f in json.loads(proc.stdout)["findings"]}


def cu_driver(version: str) -> str:
    """The driver floor of the CUDA build PyPI serves for ``version`` (the catalog's row)."""
    found = load_catalog().find_torch(version)
    assert found is not None
    toolkit = load_catalog().cuda_toolkit(found[0].pypi_default_cuda)
    assert toolkit is not None
    return toolkit.driver


@pytest.mark.parametrize("where", ["packages", "requirements"])
def test_torch_2_15_0_with_an_old_driver_is_refused_by_plain_check(tmp_path: Path, where: str) -> None:
    path = (
        profile(tmp_path, '"torch==2.15.0", "torchvision"')
        if where == "packages"
        else profile(tmp_path, requirements="numpy\ntorch==2.15.0\n")
    )
    proc = run("check", path, "--driver", "560.35.05", "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    message = findings(proc)["E-DRIVER-TOO-OLD"]
    assert "driver 560.35.05" in message and "torch 2.15.0" in message  # both sides
    assert f"order driver >= {cu_driver('2.15.0')}" in message
    plan = json.loads(proc.stdout)["plan"]
    assert plan["torch_version"] == "2.15.0" and plan["min_driver"] == cu_driver("2.15.0")


def test_the_pin_decides_the_floor_without_driver(tmp_path: Path) -> None:
    proc = run("check", profile(tmp_path, '"torch==2.15.0"'), "--json")
    assert proc.returncode == 0, proc.stdout
    got = findings(proc)
    assert "W-DRIVER-PROVISIONAL" not in got and "W-TORCH-UNDECLARED" not in got
    assert "'torch==2.15.0' is replaced by the exact pin for torch" in got["I-REQ-SUPERSEDED"]
    assert json.loads(proc.stdout)["plan"]["min_driver"] == cu_driver("2.15.0")


def test_an_unknown_exact_pin_is_refused_naming_the_line_the_releases_and_refresh(tmp_path: Path) -> None:
    proc = run("check", profile(tmp_path, requirements="torch==2.99.0\n"), "--driver", "560.35.05", "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    message = findings(proc)["E-TORCH-UNKNOWN"]
    assert message.startswith("requirements.txt:1: 'torch==2.99.0' is not a release envbuild knows")
    newest = max(load_catalog().releases, key=lambda r: tuple(map(int, r.series.split(".")))).series
    assert "series 2.1, " in message and f"{newest})" in message  # which releases exist
    assert "`envbuild catalog refresh`" in message and "`envbuild check --resolve`" in message


def test_a_range_is_not_an_exact_pin(tmp_path: Path) -> None:
    """``torch>=2.13`` or ``torch==2.15.*`` leaves the choice to the resolver: still provisional."""
    for line in ("torch>=2.13", "torch==2.15.*"):
        got = findings(run("check", profile(tmp_path, requirements=f"{line}\n"), "--json"))
        assert "W-DRIVER-PROVISIONAL" in got, line
        assert "E-TORCH-UNKNOWN" not in got
