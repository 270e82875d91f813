"""Helpers shared by the planted-secrets tests (tests/test_secrets_planted.py, tests/test_secrets_wider.py):
the CLI with no Docker engine to reach, and the check that a planted value appears nowhere."""

from __future__ import annotations

import subprocess
from pathlib import Path

import cli_support
from cli_support import environ

NO_ENGINE = "unix:///nonexistent/envbuild-test-docker.sock"  # reaching it would be exit 3


def run(
    *args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The CLI runner (:func:`cli_support.envbuild`), ``DOCKER_HOST`` at a socket that does not exist
    (reaching it would be exit 3) and ``env`` added to this process's environment."""
    return cli_support.envbuild(
        *args, env=environ(DOCKER_HOST=NO_ENGINE, **(env or {})), cwd=cwd, timeout=300
    )


def assert_absent(values: list[str], *texts: str) -> None:
    for value in values:
        for text in texts:
            assert value not in text, f"planted value {value[:6]}... leaked"
