"""Docker image references: the one parser that ``check`` (``base.image``), ``render`` (the Dockerfile's
``ARG BASE_IMAGE``) and the engine's commands (``--base-image``, ``--tag``, ``--image``) share.

The grammar is distribution/reference's (regexp.go): ``[domain[:port]/]path[:tag][@digest]`` where the
domain may be an IPv6 literal in brackets (``[::1]:5000/img:1``), path components are lowercase, the
tag is at most 128 characters, and the whole name at most 255.
"""

from __future__ import annotations

import re

_ALNUM = r"[a-z0-9]+"
_SEP = r"(?:[._]|__|[-]+)"
PATH_COMPONENT = rf"{_ALNUM}(?:{_SEP}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN_NAME = rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*"
_IPV6 = r"\[(?:[a-fA-F0-9:]+)\]"
_DOMAIN = rf"(?:{_DOMAIN_NAME}|{_IPV6})(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_NAME = rf"(?P<name>(?:{_DOMAIN}/)?{PATH_COMPONENT}(?:/{PATH_COMPONENT})*)"

IMAGE_COMPONENT_RE = re.compile(PATH_COMPONENT, re.ASCII)
IMAGE_RE = re.compile(rf"{_NAME}(?::{_TAG})?(?:@{_DIGEST})?", re.ASCII)
TAG_RE = re.compile(rf"{_NAME}(?::{_TAG})?", re.ASCII)
NAME_MAX = 255
FORM = "[registry[:port]/]namespace/name[:tag][@sha256:digest]"


def image_problem(value: str, *, digest: bool = True) -> str | None:
    """Why ``value`` is not an image reference (``digest=False``: one that can name a built image,
    so no ``@digest``), or None."""
    if not value.isascii() or any(ord(c) < 32 or ord(c) == 127 for c in value):
        return "control or non-ASCII characters"
    match = (IMAGE_RE if digest else TAG_RE).fullmatch(value)
    if match is None:
        if not digest and "@" in value:
            return "a digest cannot name a built image"
        return "not in Docker's reference grammar"
    if len(match.group("name")) > NAME_MAX:
        return f"the name is longer than {NAME_MAX} characters ({len(match.group('name'))})"
    return None
