"""Issue 8's "done when": a venv rebuilt from a bundle's requirements-rebuild.txt, anywhere on disk,
validates with ``--python`` and ``--workdir`` and passes every applicable stage, the pilot check
included, while another ``python`` is first on PATH.

Real parts only: the built-in ``pytorch-cpu`` bundle rendered, locked and fetched (conftest), a new
venv made with ``python -m venv`` and filled the way the bundle README says (``pip install --no-index
--find-links wheelhouse --no-deps --require-hashes -r requirements-rebuild.txt``), then the CLI.
Not docker: nothing here runs in a container (marked slow: installing torch takes a while).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import envbuild

pytestmark = pytest.mark.slow


def test_a_venv_rebuilt_from_the_lock_validates_outside_the_image(
    locked_pytorch_cpu: Path, tmp_path: Path
) -> None:
    bundle = locked_pytorch_cpu
    venv = tmp_path / "somewhere" / "else" / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    pip_env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    pip_env["PIP_CONFIG_FILE"] = os.devnull  # this machine's pip config (extra indexes, a cap) stays out
    installed = subprocess.run(
        [
            *(str(venv / "bin" / "python"), "-m", "pip", "install", "--no-cache-dir", "--no-index"),
            *("--find-links", str(bundle / "wheelhouse"), "--no-deps", "--require-hashes"),
            *("-r", str(bundle / "requirements-rebuild.txt")),
        ],
        capture_output=True,
        text=True,
        env=pip_env,
    )
    assert installed.returncode == 0, installed.stdout[-2000:] + installed.stderr[-2000:]

    workdir = tmp_path / "work"
    shutil.copytree(bundle / "app", workdir)
    decoy = tmp_path / "decoy-bin"  # another python first on PATH, which must not be used
    decoy.mkdir()
    for name in ("python", "python3", "python3.11"):
        (decoy / name).write_text(
            "#!/bin/sh\necho 'decoy python: not the interpreter under test' >&2\nexit 97\n"
        )
        (decoy / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{decoy}{os.pathsep}{os.environ['PATH']}"}
    out = tmp_path / "runs"
    proc = envbuild(
        *("validate", "--lock", bundle, "--python", venv / "bin" / "python", "--workdir", workdir),
        *("--keep-going", "--out", out, "--json"),
        env=env,
        timeout=900,
    )
    report = json.loads(proc.stdout)["report"]
    status = {s["stage"]: s for s in report["stages"]}
    assert proc.returncode == 0, {k: (v["status"], v.get("error")) for k, v in status.items()}
    passed = {
        *("interpreter", "os", "container", "packages", "accelerator"),
        *("compute", "extensions", "checkpoint", "checks"),
    }
    assert {k for k, v in status.items() if v["status"] == "passed"} == passed
    assert {k for k, v in status.items() if v["status"] == "skipped"} == {"devices", "memory"}
    # the whole locked set was compared, and matched
    packages = status["packages"]["facts"]
    assert packages["lock_resolved"] is True and packages["compared"] == "distributions"
    assert not packages["differences"]
    # the pilot ran with the venv's interpreter, in the workdir, despite the decoy first on PATH
    assert (workdir / "runs" / "pilot" / "summary.json").is_file()
    (check,) = status["checks"]["facts"]["checks"]
    assert check["argv"][0] == str(venv / "bin" / "python")
    interp = status["interpreter"]["facts"]
    assert any(
        "decoy-bin" in w and "not the interpreter under test" in w for w in interp.get("warnings", [])
    ), interp.get("warnings")
