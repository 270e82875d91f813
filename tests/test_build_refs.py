"""Strings that reach the engine are checked first: tags, base images, network modes, --gpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuild.errors import UsageError
from envbuild.image.refs import check_image_ref, check_network, check_tag, slug
from envbuild.image.run import parse_gpus


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


def test_check_render_and_the_engine_agree_on_image_references(tmp_path: Path) -> None:
    """One parser: a reference check accepts, render writes and --base-image takes (IPv6 registry)."""
    from build_support import envbuild

    ref = "[::1]:5000/img:1"
    assert check_image_ref(ref, "--base-image") == ref
    profile = tmp_path / "p.toml"
    profile.write_text(f'name = "p"\nkind = "ubuntu"\n\n[base]\nos = "debian12"\nimage = "{ref}"\n')
    assert envbuild("check", profile).returncode == 0
    proc = envbuild("render", profile, "--out", tmp_path / "b")
    assert proc.returncode == 0, proc.stderr
    assert f'ARG BASE_IMAGE="{ref}"' in (tmp_path / "b" / "Dockerfile").read_text()
    bad = "[::1]:5000/Img:1"  # upper case in the path: refused by all three alike
    with pytest.raises(UsageError):
        check_image_ref(bad, "--base-image")
    profile.write_text(profile.read_text().replace(ref, bad))
    assert envbuild("check", profile).returncode == 2
