"""``envbuild fetch``: fill a wheelhouse so the image builds without any package index.

Every requirement of ``BUNDLE/requirements-rebuild.txt`` is downloaded with the host's pip, as
binary wheels for the image's platform (x86_64, every manylinux tag the image's glibc accepts) and
the image's Python (both from the bundle's lock).  ``BUNDLE/tools/`` receives envbuild's own wheel
plus its runtime dependencies, for the validator's separate venv in the image.  Each folder gets a
``SHA256SUMS`` (sha256sum format) listing what it holds.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from envbuild.build.context import check_bundle
from envbuild.build.selfwheel import build_self_wheel
from envbuild.errors import BuildError, BundleError
from envbuild.models import Lock, OsId

# glibc of each supported OS (x86_64): the newest manylinux_2_NN tag its pip accepts.
GLIBC: dict[OsId, tuple[int, int]] = {"debian12": (2, 36), "ubuntu22.04": (2, 35), "ubuntu24.04": (2, 39)}
_LEGACY = (
    "manylinux2014_x86_64",
    "manylinux_2_12_x86_64",
    "manylinux2010_x86_64",
    "manylinux_2_5_x86_64",
    "manylinux1_x86_64",
)
MIN_TOOL_PYTHON = (3, 10)  # envbuild's own Requires-Python
TAIL_LINES = 25


@dataclass(frozen=True)
class FetchResult:
    wheelhouse: Path
    wheels: tuple[str, ...]  # file names in the wheelhouse
    tools: tuple[str, ...]  # file names in BUNDLE/tools
    seconds: float


def platform_tags(os_id: OsId) -> list[str]:
    """Every x86_64 manylinux platform tag an image of ``os_id`` can install, newest first."""
    try:
        major, minor = GLIBC[os_id]
    except KeyError:
        raise BundleError(
            f"lock os {os_id!r} has no known glibc; valid: {', '.join(sorted(GLIBC))}"
        ) from None
    return [f"manylinux_{major}_{n}_x86_64" for n in range(minor, 16, -1)] + list(_LEGACY)


def target_args(lock: Lock) -> list[str]:
    """pip options selecting wheels for the image instead of the host."""
    args = ["--only-binary=:all:", "--implementation", "cp", "--python-version", lock.python_version]
    for tag in platform_tags(lock.os):
        args += ["--platform", tag]
    return args


def download_command(requirements: Path, dest: Path, lock: Lock, python: str = sys.executable) -> list[str]:
    return [python, "-m", "pip", "download", "--dest", str(dest), *target_args(lock), "-r", str(requirements)]


def tools_command(self_wheel: Path, dest: Path, lock: Lock, python: str = sys.executable) -> list[str]:
    return [python, "-m", "pip", "download", "--dest", str(dest), *target_args(lock), str(self_wheel)]


def write_sha256sums(folder: Path) -> tuple[str, ...]:
    """Write ``folder/SHA256SUMS`` for every ``*.whl`` in it; return the wheel names."""
    names = sorted(p.name for p in folder.glob("*.whl") if p.is_file())
    lines = []
    for name in names:
        digest = hashlib.sha256()
        with (folder / name).open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        lines.append(f"{digest.hexdigest()}  {name}\n")
    tmp = folder / "SHA256SUMS.part"
    tmp.write_text("".join(lines), encoding="utf-8")
    tmp.replace(folder / "SHA256SUMS")
    return tuple(names)


def _run_pip(command: list[str], what: str) -> None:
    env = dict(os.environ)
    env.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    proc = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        lines = (proc.stdout + proc.stderr).strip().splitlines()
        tail = "\n".join(f"  | {line}" for line in lines[-TAIL_LINES:])
        raise BuildError(
            f"fetch failed while downloading {what} (pip exit {proc.returncode}):\n{tail}\n"
            "pip needs a reachable index (or PIP_FIND_LINKS) on this host; the image itself needs none."
        )


def fetch(
    bundle: Path,
    wheelhouse: Path | None = None,
    *,
    tools: bool = True,
    python: str = sys.executable,
    say: Callable[[str], None] = lambda _: None,
) -> FetchResult:
    """Download every wheel the bundle needs into ``wheelhouse`` (default ``BUNDLE/wheelhouse``)."""
    lock = check_bundle(bundle)
    dest = wheelhouse if wheelhouse is not None else bundle / "wheelhouse"
    if dest.exists() and not dest.is_dir():
        raise BundleError(f"--wheelhouse {dest}: exists and is not a directory")
    dest.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    say(f"downloading requirements for Python {lock.python_version} / {lock.os} into {dest}")
    _run_pip(download_command(bundle / "requirements-rebuild.txt", dest, lock, python), "the requirements")
    wheels = write_sha256sums(dest)
    tool_names: tuple[str, ...] = ()
    if tools:
        version = tuple(int(p) for p in lock.python_version.split(".")[:2])
        if version < MIN_TOOL_PYTHON:
            raise BundleError(
                f"{bundle}/envbuild.lock.json: python_version {lock.python_version}: the in-image validator "
                f"needs Python >= {'.'.join(map(str, MIN_TOOL_PYTHON))}; fetch with --no-tools to skip it"
            )
        tools_dir = bundle / "tools"
        tools_dir.mkdir(exist_ok=True)
        say(f"building envbuild's own wheel and downloading its dependencies into {tools_dir}")
        self_wheel = build_self_wheel(tools_dir)
        _run_pip(tools_command(self_wheel, tools_dir, lock, python), "envbuild's own dependencies")
        tool_names = write_sha256sums(tools_dir)
    return FetchResult(dest, wheels, tool_names, time.monotonic() - started)
