"""Shared fixtures.  Docker tests never skip: a missing engine is a failure (CI starts one)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BASE_IMAGE = os.environ.get("ENVBUILD_TEST_BASE_IMAGE", "envbuild/debian:12")


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
