"""Shared fixtures.  Docker tests never skip: a missing engine is a failure (CI starts one)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BASE_IMAGE = os.environ.get("ENVBUILD_TEST_BASE_IMAGE", "envbuild/debian:12")


@pytest.fixture(autouse=True)
def _no_user_overlay(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the user's catalog overlay (``envbuild catalog refresh`` writes it under
    $XDG_DATA_HOME/envbuild): every test gets an empty data folder of its own, subprocesses included."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("xdg-data")))


@pytest.fixture(scope="session")
def docker_client() -> Iterator[object]:
    import docker

    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:  # any failure to reach the engine fails the test
        pytest.fail(f"Docker engine not reachable ({exc}); run scripts/docker-engine.sh", pytrace=False)
    try:
        client.images.get(BASE_IMAGE)
    except Exception:
        pytest.fail(f"base image {BASE_IMAGE} missing; run scripts/base-image.sh", pytrace=False)
    yield client
    client.close()


# The PyTorch index is unreachable from these machines: PyPI plus the CPU torch file on disk stand in
# (the lock records both as its provenance).
LOCK_SOURCES = ("--index-url", "https://pypi.org/simple", "--find-links", "/opt/wheels")


@pytest.fixture(scope="session")
def locked_pytorch_cpu(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built-in ``pytorch-cpu`` bundle, rendered, locked and fetched once per test session."""
    from build_support import envbuild

    bundle = tmp_path_factory.mktemp("locked") / "pytorch-cpu"
    for args in (
        ("render", "pytorch-cpu", "--out", bundle),
        ("lock", bundle, *LOCK_SOURCES),
        ("fetch", bundle, "--find-links", "/opt/wheels"),  # torch: from that folder, by name and sha256
    ):
        proc = envbuild(*args)
        assert proc.returncode == 0, f"envbuild {args[0]} exited {proc.returncode}:\n{proc.stderr}"
    return bundle
