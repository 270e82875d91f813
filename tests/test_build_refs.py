"""Strings that reach the engine are checked first: tags, base images, network modes, --gpus."""

from __future__ import annotations

import pytest

from envbuild.build.refs import check_image_ref, check_network, check_tag, slug
from envbuild.build.run import parse_gpus
from envbuild.errors import UsageError


@pytest.mark.parametrize(
    "ref",
    [
        "envbuild/debian:12",
        "nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04",
        "localhost:5000/a/b_c:v1.0",
        "ubuntu@sha256:" + "a" * 64,
        "x",
    ],
)
def test_valid_image_refs(ref: str) -> None:
    assert check_image_ref(ref, "--base-image") == ref


@pytest.mark.parametrize(
    "ref",
    ["", "Ubuntu:24.04", "ubuntu:24.04\nRUN evil", "ubuntu; rm -rf /", "a:b:c", "-x", "ubuntu:" + "t" * 200],
)
def test_invalid_image_refs(ref: str) -> None:
    with pytest.raises(UsageError, match=r"--base-image: .* is not a valid image reference"):
        check_image_ref(ref, "--base-image")


def test_tag_refuses_digest() -> None:
    with pytest.raises(UsageError, match="--tag"):
        check_tag("x@sha256:" + "a" * 64)
    assert check_tag("envbuild-test/e2e:1a2b") == "envbuild-test/e2e:1a2b"


def test_network_choices() -> None:
    assert check_network("none") == "none"
    with pytest.raises(UsageError, match="valid choices: bridge, default, host, none"):
        check_network("container:abc")


def test_slug() -> None:
    assert slug("envbuild/x:1.0") == "envbuild-x-1.0"


@pytest.mark.parametrize(("value", "expected"), [("all", -1), ("1", 1), ("8", 8), ("none", 0), (None, None)])
def test_parse_gpus(value: str | None, expected: int | None) -> None:
    assert parse_gpus(value) == expected


@pytest.mark.parametrize("value", ["0", "-1", "two", "all,1", "", "None"])
def test_parse_gpus_rejects(value: str) -> None:
    with pytest.raises(UsageError, match=r"--gpus: .*'all', a number of GPUs >= 1, or 'none'"):
        parse_gpus(value)
