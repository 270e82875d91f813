"""Helpers shared by the ``envbuild lock`` tests: a clean environment for uv, the CLI run in it, small
custom profiles rendered into bundles, and the lock read back.

The loopback indexes they lock against are the shared fixtures of tests/conftest.py (``tree``, ``urls``
and ``env`` for the standard universe of tests/index_support.py, ``torch_urls`` for the torch universe of
tests/torch_universe.py).  Nothing leaves 127.0.0.1: subprocesses run without PIP_*/UV_* settings and
without the machine's pip config.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import cli_support

LOCK = "envbuild.lock.json"
REQUIREMENTS = "requirements-rebuild.txt"


def clean_env(uv_cache: Path) -> dict[str, str]:
    """No PIP_*/UV_* settings, no pip config file, loopback exempt from proxies, a private uv cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    no_proxy = ",".join(filter(None, [env.get("NO_PROXY", ""), "127.0.0.1", "localhost"]))
    env.update(
        NO_PROXY=no_proxy,
        no_proxy=no_proxy,
        PIP_CONFIG_FILE=os.devnull,
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        UV_CACHE_DIR=str(uv_cache),
    )
    return env


def envbuild(
    env: dict[str, str], *args: str | Path, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """The CLI runner (:func:`cli_support.envbuild`) in ``env``, the whole environment (:func:`clean_env`)."""
    return cli_support.envbuild(*args, env=env, cwd=cwd)


def write_profile(
    folder: Path, name: str, packages: list[str] | None = None, requirements: str | None = None
) -> Path:
    """``folder/profile.toml`` (custom, Debian 12, Python 3.11) and, when given, ``requirements.txt``."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [
        f'name = "{name}"',
        'kind = "custom"',
        "[base]",
        'os = "debian12"',
        "[python]",
        'version = "3.11"',
        f"packages = {json.dumps(packages or [])}",
    ]
    if requirements is not None:
        (folder / "requirements.txt").write_text(requirements, encoding="utf-8")
        lines.append('requirements = ["requirements.txt"]')
    path = folder / "profile.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def render(
    env: dict[str, str],
    tmp_path: Path,
    name: str,
    packages: list[str] | None = None,
    requirements: str | None = None,
    *,
    force: bool = False,
) -> Path:
    """A bundle rendered from :func:`write_profile`'s profile (``tmp_path/NAME-bundle``)."""
    profile = write_profile(tmp_path / f"{name}-profile", name, packages, requirements)
    bundle = tmp_path / f"{name}-bundle"
    done = envbuild(env, "render", profile, "--out", bundle, *(["--force"] if force else []))
    assert done.returncode == 0, done.stdout + done.stderr
    return bundle


def read_lock(bundle: Path) -> dict[str, Any]:
    return json.loads((bundle / LOCK).read_text(encoding="utf-8"))


def h100_profile(
    folder: Path,
    *lines: str,
    packages: tuple[str, ...] = (),
    torch: str | None = None,
    kind: str | None = None,
    name: str = "replan",
    python: tuple[str, ...] = (),
) -> Path:
    """A custom (or, with ``torch``, pytorch) profile for an H100, CPython 3.12, Ubuntu 24.04; ``lines``
    go before ``[python]``, ``python`` into it after ``packages``; ``kind`` overrides the kind."""
    folder.mkdir(parents=True, exist_ok=True)
    text = [
        f'name = "{name}"',
        f'kind = "{kind or ("pytorch" if torch else "custom")}"',
        "[accelerator]",
        'backend = "cuda"',
        'targets = ["h100"]',
        *lines,
        "[python]",
        'version = "3.12"',
        f"packages = {json.dumps(list(packages))}",
        *python,
        "[validate]",
        "compile_extensions = false",
    ]
    if torch:
        text += ["[torch]", f'version = "{torch}"']
    path = folder / "profile.toml"
    path.write_text("\n".join(text) + "\n", encoding="utf-8")
    return path
