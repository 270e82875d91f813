"""Validate the strings that reach the engine: image references, network modes, bundle paths."""

from __future__ import annotations

import re

from envbuild.errors import UsageError, choices

# Docker's reference grammar (distribution/reference), without the optional digest for tags.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN = (
    r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?)"
)
_NAME = rf"(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_IMAGE_RE = re.compile(rf"^{_NAME}(?::{_TAG})?(?:@{_DIGEST})?$")
_TAG_RE = re.compile(rf"^{_NAME}(?::{_TAG})?$")

NETWORK_MODES = ("bridge", "default", "host", "none")


def check_image_ref(value: str, what: str) -> str:
    """Return ``value`` when it is a valid image reference (name[:tag][@digest]), else raise."""
    if len(value) > 255 or not _IMAGE_RE.match(value):
        raise UsageError(
            f"{what}: {value!r} is not a valid image reference "
            "(expected [registry/]name[:tag][@sha256:digest], lowercase name)"
        )
    return value


def check_tag(value: str, what: str = "--tag") -> str:
    """Return ``value`` when it can name a built image (name[:tag], no digest), else raise."""
    if len(value) > 255 or not _TAG_RE.match(value):
        raise UsageError(
            f"{what}: {value!r} is not a valid image tag (expected [registry/]name[:tag], lowercase name)"
        )
    return value


def check_network(value: str) -> str:
    if value not in NETWORK_MODES:
        raise UsageError(f"--network: {value!r} is not supported; valid choices: {choices(NETWORK_MODES)}")
    return value


def slug(value: str) -> str:
    """A file-name-safe form of an image tag: ``envbuild/x:1`` -> ``envbuild-x-1``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", value).strip("-.") or "image"
