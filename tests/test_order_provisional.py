"""Issue 37 item 3: before `envbuild lock`, a driver floor and CUDA version that depend on a torch the
resolution has not decided are marked provisional right where they are stated (the bundle README's
"What to order", check's plan rows, the order summary, its JSON); once the plan is derived from the torch
the resolved set installs, nothing is provisional.

The case is ComfyUI's requirements.txt as published (tests/corpus/comfyui/requirements.txt: unpinned
torch, torchvision, torchaudio), in a profile written by hand here without torch.version."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from cli_support import envbuild

from envbuild.catalog import load_catalog
from envbuild.catalog.prices import with_order
from envbuild.plan import check
from envbuild.plan.resolved import ResolvedTorch
from envbuild.profile import load_profile
from envbuild.render.lockfile import torch_pin_origin
from envbuild.render.readme import render_readme
from envbuild.versions import driver_at_least

REPO = Path(__file__).resolve().parent.parent
COMFYUI = REPO / "tests" / "corpus" / "comfyui" / "requirements.txt"
# Written by hand: ComfyUI's file as it is, no torch.version, CUDA derived, an H100.
PROFILE = """\
name = "comfyui"
kind = "custom"

[base]
os = "ubuntu24.04"

[accelerator]
backend = "cuda"
targets = ["h100"]

[python]
version = "3.12"
requirements = ["requirements.txt"]
"""


def comfyui(tmp_path: Path) -> Path:
    shutil.copyfile(COMFYUI, tmp_path / "requirements.txt")
    path = tmp_path / "comfyui.toml"
    path.write_text(PROFILE, encoding="utf-8")
    return path


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return envbuild(*args, cwd=REPO)


def what_to_order(readme: str) -> str:
    return readme.split("## What to order", 1)[1].split("\n| card", 1)[0]


def test_comfyui_readme_marks_the_floor_and_cuda_provisional_where_stated(tmp_path: Path) -> None:
    assert "\ntorch\n" in COMFYUI.read_text(encoding="utf-8")  # the corpus file pins no torch
    proc = run("render", str(comfyui(tmp_path)), "--out", str(tmp_path / "b"))
    assert proc.returncode == 0, proc.stderr
    order = what_to_order((tmp_path / "b" / "README.md").read_text(encoding="utf-8"))
    driver = next(line for line in order.splitlines() if "Minimum NVIDIA driver" in line)
    cuda = next(line for line in order.splitlines() if line.startswith("- CUDA "))
    # the floor is stated once, as "at least", provisional in the same line (before: "**560.35.05**" alone)
    assert "at least **" in driver and "(provisional: torch is not pinned" in driver, driver
    assert "`envbuild lock .`" in driver
    assert "(provisional: torch is not pinned" in cuda, cuda
    # render's own order summary says it too
    assert "NVIDIA driver >= " in proc.stdout and "(provisional: torch is not pinned" in proc.stdout


def test_check_rows_summary_and_json_say_provisional(tmp_path: Path) -> None:
    profile = str(comfyui(tmp_path))
    human = " ".join(run("check", profile).stdout.split())
    assert "min driver 560.35.05 (provisional: torch is not pinned" in human
    assert "backend cuda 12.6 (provisional: torch is not pinned" in human
    assert "I-DRIVER-UNKNOWN: no --driver given: order a machine with NVIDIA driver >= 560.35.05" in human
    assert "provisional: torch is not pinned, see W-DRIVER-PROVISIONAL" in human
    (line,) = json.loads(run("check", profile, "--json").stdout)["plan"]["order"]
    assert line["min_driver_provisional"] is True


def test_a_declared_torch_is_not_provisional() -> None:
    proc = run("check", "pytorch", "--json")
    (line,) = json.loads(proc.stdout)["plan"]["order"]
    assert line["min_driver"] and line["min_driver_provisional"] is False
    assert "provisional" not in run("check", "pytorch").stdout


def test_after_resolution_the_readme_states_the_resolved_floor_without_provisional(tmp_path: Path) -> None:
    """What lock does (envbuild.lock.replan): the plan derived again from the torch the resolved set
    installs.  The resolved torch here is what pypi.org served for ComfyUI's bare torch line when this was
    written (torch 2.15.0, its default cu132 build, locked from pypi.org on 2026-12-03)."""
    profile = load_profile(str(comfyui(tmp_path)))
    resolved = ResolvedTorch(
        version="2.15.0", local=None, variant="cu132", evidence="torch 2.15.0 requires cuda-toolkit 13.2.2"
    )
    result = with_order(check(profile, resolved=resolved))
    toolkit = load_catalog().cuda_toolkit("cu132")
    assert toolkit is not None and result.plan.min_driver is not None
    assert driver_at_least(result.plan.min_driver, toolkit.driver)  # the cu132 floor, not 560.35.05
    assert not driver_at_least("560.35.05", result.plan.min_driver)
    order = what_to_order(render_readme(result, "envbuild render comfyui.toml"))
    assert f"Minimum NVIDIA driver on the host: **{result.plan.min_driver}**" in order
    assert "- CUDA 13.2, torch 2.15.0 (cu132 build)\n" in order  # pinned without a local tag, as lock does
    assert "provisional" not in order


def test_the_lock_says_the_resolved_torch_came_from_the_declared_bare_line(tmp_path: Path) -> None:
    """The plan's requirements drop ComfyUI's bare ``torch`` line once the resolved torch is pinned; the
    pin's provenance still names that line, not "a dependency requires it"."""
    profile = load_profile(str(comfyui(tmp_path)))
    resolved = ResolvedTorch(version="2.15.0", local=None, variant="cu132", evidence="recorded above")
    plan = check(profile, resolved=resolved).plan
    assert not any(line.name == "torch" for line in plan.requirements)  # superseded by the pin
    origin = torch_pin_origin(plan)
    assert origin.endswith("(requirements.txt:4: torch allows it)"), origin
