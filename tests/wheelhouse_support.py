"""Helpers shared by the wheelhouse tests (tests/test_build_wheelhouse.py, tests/test_faults_wheelhouse.py):
the CLI run from the repository, a one-package profile and the lock's files.  Their fixtures (``urls``,
``no_engine_env``, ``fetched``) are in tests/conftest.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import cli_support

REPO = Path(__file__).resolve().parent.parent


def run(*args: str | Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return cli_support.envbuild(*args, env=env, cwd=REPO)


def write_profile(folder: Path, name: str, package: str) -> Path:
    profile = folder / f"{name}.toml"
    profile.write_text(
        f'name = "{name}"\nkind = "custom"\n[base]\nos = "debian12"\n'
        f'[python]\nversion = "3.11"\npackages = ["{package}"]\n'
    )
    return profile


def locked_files(bundle: Path) -> dict[str, str]:
    lock = json.loads((bundle / "envbuild.lock.json").read_text())
    return {f["filename"]: f["sha256"] for d in lock["distributions"] for f in d["files"]}
