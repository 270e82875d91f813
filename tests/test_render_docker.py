"""What the Docker engine makes of the rendered ENV and LABEL quoting (classic builder).

Hostile-looking but valid values (``$HOME``, quotes, backslashes, spaces, ``#``) must reach the
image literally.  Needs the engine: marked ``docker``; fails (never skips) without one.
"""

from __future__ import annotations

import io
import uuid
from typing import Any

import pytest
from test_render_plans import cuda_plan, profile

from envbuild.render import render_dockerfile

VALUES = {
    "PLAIN": "/workspace/.cache/hf",
    "DOLLAR": "$HOME and ${PATH} stay literal",
    "QUOTES": "say \"hi\" and 'bye'",
    "BACKSLASH": "C:\\path\\n not a newline \\",
    "HASH": "# not a comment",
    "UNICODE": "Grüße ✓",
}


def env_and_label_block(text: str) -> str:
    """The final stage's user ENV and LABEL instructions, exactly as rendered."""
    lines = text.splitlines()
    start = lines.index("# hadolint ignore=DL3064")
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("WORKDIR"))
    return "\n".join(lines[start:end]) + "\n"


@pytest.mark.docker
def test_env_and_labels_reach_the_image_literally(docker_client: Any) -> None:
    from conftest import BASE_IMAGE

    plan = cuda_plan(profile=profile(env=VALUES, description='Quote "this" $NOT expanded'))
    dockerfile = f"FROM {BASE_IMAGE}\n" + env_and_label_block(render_dockerfile(plan))
    tag = f"envbuild-test/render-quoting:{uuid.uuid4().hex[:12]}"
    docker_client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, forcerm=True)
    try:
        config = docker_client.api.inspect_image(tag)["Config"]
        env = dict(item.split("=", 1) for item in config["Env"])
        for key, value in VALUES.items():
            assert env[key] == value, key
        labels = config["Labels"]
        assert labels["org.opencontainers.image.description"] == 'Quote "this" $NOT expanded'
        assert labels["org.envbuild.profile-sha256"] == plan.profile.sha256
    finally:
        docker_client.images.remove(tag, force=True)


@pytest.mark.docker
def test_base_image_default_resolves_without_build_arg(docker_client: Any) -> None:
    """The quoted ``ARG BASE_IMAGE="..."`` default must work when no --build-arg is given."""
    from conftest import BASE_IMAGE

    text = render_dockerfile(cuda_plan(base_image=BASE_IMAGE))
    arg_line = next(line for line in text.splitlines() if line.startswith("ARG BASE_IMAGE="))
    assert arg_line == f'ARG BASE_IMAGE="{BASE_IMAGE}"'
    dockerfile = f"{arg_line}\nFROM ${{BASE_IMAGE}}\nLABEL probe=1\n"
    tag = f"envbuild-test/render-arg:{uuid.uuid4().hex[:12]}"
    image, _ = docker_client.images.build(
        fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, forcerm=True
    )
    try:
        base = docker_client.images.get(BASE_IMAGE)
        assert image.attrs["RootFS"]["Layers"] == base.attrs["RootFS"]["Layers"]
    finally:
        docker_client.images.remove(tag, force=True)
