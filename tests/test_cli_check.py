"""`envbuild check` and `envbuild targets` from the outside: exit codes 0/1/2, JSON shape, imports."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from cli_support import envbuild

REPO = Path(__file__).resolve().parent.parent


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return envbuild(*args, cwd=REPO)


def test_check_ok_exit_0_json() -> None:
    proc = run("check", "pytorch", "--target", "h100", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert set(data) == {"format", "command", "ok", "findings", "plan"} and data["ok"] is True
    for finding in data["findings"]:
        assert set(finding) == {"severity", "code", "message", "source"}
    plan = data["plan"]
    assert set(plan["profile"]) == {"name", "path", "sha256"} and plan["profile"]["name"] == "pytorch"
    assert plan["pins"][0]["name"] == "torch" and plan["pins"][0]["local"] == plan["torch_variant"]
    assert plan["targets"][0]["id"] == "h100"
    assert plan["base_image"].startswith("nvidia/cuda:")


def test_check_errors_exit_1() -> None:
    proc = run("check", "pytorch", "--target", "mi300x", "--json")
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    assert data["ok"] is False
    assert "E-VENDOR-MISMATCH" in {f["code"] for f in data["findings"]}


def test_check_human_output() -> None:
    proc = run("check", "pytorch", "--target", "b200", "--driver", "560.35.05")
    assert proc.returncode == 1
    assert "E-DRIVER-CARD" in proc.stdout and "base image" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_driver_ok_exit_0() -> None:
    proc = run("check", "pytorch", "--driver", "580.95.05", "--json")
    assert proc.returncode == 0, proc.stdout
    assert "I-DRIVER-UNKNOWN" not in proc.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("check", "pytorch", "--target", "h999"), "unknown target 'h999'; valid targets:"),
        (("check", "pytorch", "--driver", "five-seventy"), "--driver"),
        (("check", "no-such-profile-xyz"), "no-such-profile-xyz"),
        (("check",), "Missing argument 'PROFILE'"),
    ],
)
def test_usage_exit_2(args: tuple[str, ...], message: str) -> None:
    proc = run(*args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_invalid_profile_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\nkind = "pytorch"\n[accelerator]\nbackend = "opencl"\n', encoding="utf-8")
    proc = run("check", str(bad))
    assert proc.returncode == 2
    assert "accelerator.backend" in proc.stderr


def test_targets_json() -> None:
    proc = run("targets", "--json")
    assert proc.returncode == 0
    rows = json.loads(proc.stdout)
    ids = [r["id"] for r in rows]
    assert {"h100", "b200", "rtx4090", "mi300x", "cpu"} <= set(ids)
    assert all(r["source"] and r["tier"] for r in rows)
    b200 = next(r for r in rows if r["id"] == "b200")
    assert b200["cards_per_lot"] == 2


def test_targets_table() -> None:
    proc = run("targets")  # not a terminal: rich renders 80 columns
    assert proc.returncode == 0
    words = set(proc.stdout.split())
    from envbuild.catalog import load_catalog

    for card in load_catalog().cards:  # every id is printed whole (ids are what users copy)
        assert card.id in words, card.id
        assert card.arch in words or not card.arch


def test_check_imports_neither_torch_nor_docker_nor_a_validator(tmp_path: Path) -> None:
    """A cold `check` with the catalog cache filled imports what it uses: no torch, no docker, and
    neither the validation library (the cache holds validated rows) nor the rendering libraries (rich
    is imported for text output only; click parses the command line)."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    for _ in range(2):  # the first run validates the catalog files and fills the cache
        proc = envbuild("check", "custom", "--json", env=env, cwd=REPO, python=("-X", "importtime"))
        assert proc.returncode == 0, proc.stderr[-2000:]
    imported = {
        line.rsplit("|", 1)[-1].strip().split(".")[0]
        for line in proc.stderr.splitlines()
        if "import time:" in line
    }
    assert {"envbuild", "packaging", "tomllib"} <= imported  # the probe sees real imports
    assert not imported & {"torch", "docker", "pydantic", "pydantic_core", "rich", "jinja2"}
    modules = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "import time:" in line}
    other_commands = {"envbuild.cli._build", "envbuild.cli._validate", "envbuild.cli._image"}
    assert "envbuild.plan" in modules and not modules & other_commands  # commands load lazily
