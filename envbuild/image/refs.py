"""Validate the strings that reach the engine: image references, network modes, bundle paths."""

from __future__ import annotations

import re

from envbuild.errors import UsageError, choices
from envbuild.imageref import FORM, image_problem

NETWORK_MODES = ("bridge", "default", "host", "none")


def check_image_ref(value: str, what: str) -> str:
    """Return ``value`` when it is a valid image reference (name[:tag][@digest]), else raise."""
    problem = image_problem(value)
    if problem is not None:
        raise UsageError(f"{what}: {value!r} is not a valid image reference ({problem}); expected {FORM}")
    return value


def check_tag(value: str, what: str = "--tag") -> str:
    """Return ``value`` when it can name a built image (name[:tag], no digest), else raise."""
    problem = image_problem(value, digest=False)
    if problem is not None:
        raise UsageError(
            f"{what}: {value!r} is not a valid image tag ({problem}); expected [registry[:port]/]name[:tag]"
        )
    return value


def check_network(value: str) -> str:
    if value not in NETWORK_MODES:
        raise UsageError(f"--network: {value!r} is not supported; valid choices: {choices(NETWORK_MODES)}")
    return value


def slug(value: str) -> str:
    """A file-name-safe form of an image tag: ``envbuild/x:1`` -> ``envbuild-x-1``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", value).strip("-.") or "image"
