"""A smoke run of envbuild's three promises on the interpreter that runs this script, with runtime
dependencies only (no pytest, no torch): used by scripts/smoke.sh for the declared Python floor, the newest
Python here, and the lowest declared dependency versions.

    check   the built-in ``pytorch`` profile for an H100 (the catalog, no network)
    render  that bundle, and a small CPU profile for this Python
    lock    the small profile against a loopback index (tests/index_support.py, standard library only)
    validate a venv made with this Python and filled from the same index (--lock BUNDLE --python VENV)
    report verify  the report validate wrote

Each step runs ``envbuild`` as a user would (its console script, a subprocess) and must exit 0; the script
exits 1 on the first step that does not, printing its output.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from index_support import make_wheel, serve_index  # noqa: E402  (the tests' loopback index, stdlib only)

# A base OS that provisions each Python (the catalog's platform rows): this machine's Debian 12 for its
# own 3.11, Ubuntu (system or deadsnakes) for the others.
OS_FOR = {"3.10": "ubuntu22.04", "3.11": "debian12", "3.12": "ubuntu24.04", "3.13": "ubuntu24.04"}
ENVBUILD = Path(sys.executable).parent / "envbuild"
PROFILE = """\
name = "smoke"
kind = "custom"
description = "envbuild's smoke profile: one locked distribution and its dependency, CPU only"
[base]
os = "{os}"
[accelerator]
backend = "cpu"
[python]
version = "{python}"
packages = ["smokeapp==1.0"]
"""


def step(*args: str | Path) -> str:
    argv = [str(ENVBUILD), *map(str, args)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    label = " ".join(argv[1:3])
    if proc.returncode != 0:
        print(f"smoke: FAILED envbuild {label} (exit {proc.returncode})\n{proc.stdout}\n{proc.stderr}")
        raise SystemExit(1)
    print(f"smoke: ok envbuild {label}")
    return proc.stdout


def expect_floors() -> None:
    """Every dependency pyproject.toml declares for this Python is installed at its declared floor."""
    import importlib.metadata

    from packaging.requirements import Requirement
    from packaging.version import Version

    from envbuild.compat import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    wrong = []
    for text in declared:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate():
            continue
        floors = [Version(s.version) for s in req.specifier if s.operator == ">="]
        installed = Version(importlib.metadata.version(req.name))
        if len(floors) != 1 or installed != floors[0]:
            wrong.append(f"{req.name}: declared {req.specifier or '(no floor)'}, installed {installed}")
    if wrong:
        print(
            "smoke: FAILED the lowest resolution did not install the declared floors:\n  "
            + "\n  ".join(wrong)
        )
        raise SystemExit(1)
    print(f"smoke: ok every declared floor installed ({len(declared)} dependencies)")


def main() -> None:
    if "--expect-floors" in sys.argv[1:]:
        expect_floors()
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    print(f"smoke: Python {sys.version.split()[0]} ({sys.executable})")
    with tempfile.TemporaryDirectory(prefix="envbuild-smoke-") as scratch:
        work = Path(scratch)
        step("check", "pytorch", "--target", "h100")
        step("render", "pytorch", "--target", "h100", "--out", work / "pytorch-h100")

        files = work / "index"
        files.mkdir()
        make_wheel(files, "fakedep", "1.0")
        make_wheel(files, "smokeapp", "1.0", requires=["fakedep>=1.0"])
        profile = work / "smoke.toml"
        profile.write_text(PROFILE.format(python=python, os=OS_FOR[python]), encoding="utf-8")
        bundle = work / "bundle"
        with serve_index(files) as base:
            index = f"{base}/simple/"
            step("check", profile)
            step("render", profile, "--out", bundle)
            step("lock", bundle, "--index-url", index)
            lock = json.loads((bundle / "envbuild.lock.json").read_text(encoding="utf-8"))
            pinned = sorted(f"{d['name']}=={d['version']}" for d in lock["distributions"])
            if pinned != ["fakedep==1.0", "smokeapp==1.0"]:
                print(f"smoke: FAILED the lock pins {pinned}, not fakedep==1.0 and smokeapp==1.0")
                raise SystemExit(1)

            target = work / "venv"
            venv.create(target, with_pip=True)
            subprocess.run(
                [
                    target / "bin" / "python",
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    "--index-url",
                    index,
                    "smokeapp==1.0",
                ],
                check=True,
                env={"PATH": "/usr/bin:/bin", "PIP_CONFIG_FILE": "/dev/null", "PIP_RETRIES": "0"},
            )
        # The os stage compares /etc/os-release with the lock: only where the lock's OS is this one's.
        skip = [] if OS_FOR[python] == "debian12" else ["--skip", "os"]
        runs = work / "runs"
        out = json.loads(
            step(
                "validate",
                "--lock",
                bundle,
                "--python",
                target / "bin" / "python",
                *skip,
                "--out",
                runs,
                "--json",
            )
        )
        if not out["ok"]:
            print(f"smoke: FAILED validate reported not ok: {out['findings']}")
            raise SystemExit(1)
        step("report", "verify", out["report_dir"])
    print(f"smoke: every step passed on Python {python}")


if __name__ == "__main__":
    main()
