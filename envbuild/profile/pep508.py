"""One requirement string (PEP 508, or a bare URL pip accepts) checked and normalised.

Used for ``python.packages`` entries and for each requirement line of a requirements file.  Refuses
``${VAR}`` references, local paths and ``file:`` URLs, unsupported URL schemes, and URLs that carry
credentials or tokens (in the user info, a query parameter, or a well-known token format).
"""

from __future__ import annotations

import re
from urllib.parse import SplitResult, unquote, urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)

from envbuild.profile.fields import SECRET_HINT, has_control, secret_value_reason
from envbuild.secrets import redact, url_parts

ENV_VAR_RE = re.compile(r"\$\{[^}$]*\}")  # "[^}$]": linear time on "${${${..."
SCHEME_RE = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://")
_FILE_SYNTAX_RE = re.compile(r"\s#| -")  # what pip's requirements-file reader would cut or split at
_VCS_PREFIXES = ("git+", "hg+", "svn+", "bzr+")

ENV_VAR_MSG = (
    "environment variable references (${VAR}) are not allowed: pip would expand them at build time and "
    f"bake the value into the image; {SECRET_HINT}"
)


class LineError(Exception):
    """A problem in one requirement line; the loader turns it into an Issue.

    The message is redacted by the secret policy: a line it quotes never shows a password or token."""

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))


def _split_url(url: str) -> SplitResult:
    try:
        parts = urlsplit(url)
        _ = parts.port  # validates the port
    except ValueError as exc:
        raise LineError(f"URL {url!r} is malformed: {exc}") from None
    return parts


def check_url(url: str, *, allow_ssh_user: bool = False) -> None:
    if has_control(url) or " " in url or "\\" in url:
        raise LineError(f"URL {url!r} contains spaces, backslashes or control characters")
    parts = _split_url(url)
    for part in url_parts(url):  # the one rule, shared with redaction (envbuild/secrets/urls.py)
        if part.kind == "user" and allow_ssh_user and parts.password is None:
            continue  # git+ssh://git@host names the account; the key stays on the machine
        where = {"query": f"a secret in {part.name!r}", "path": "an access token in its path"}
        what = where.get(part.kind, "credentials")
        raise LineError(f"URL for host {parts.hostname!r} carries {what}: {SECRET_HINT}")
    if secret_value_reason(url):
        host = parts.hostname
        raise LineError(f"URL for host {host!r} holds what looks like an access token: {SECRET_HINT}")


def parse_requirement(arg: str) -> tuple[str, str]:
    """Parse one requirement (no options): return ``(normalised text, canonical name)``."""
    if ENV_VAR_RE.search(arg):
        raise LineError(ENV_VAR_MSG)
    if has_control(arg):
        raise LineError(
            "requirement contains control characters or invisible/direction-changing Unicode characters"
        )
    text = arg.strip()
    if not text:
        raise LineError("requirement is empty: write a PEP 508 string like 'numpy==2.2.6'")
    if text.startswith("-"):
        raise LineError(f"{text!r} is an option, not a requirement; put options in a requirements file")
    if "@" not in text.split(";")[0] or SCHEME_RE.match(text):
        text = _bare_location(text)
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise LineError(f"not a valid requirement (PEP 508): {exc}") from None
    if req.url is not None:
        scheme = _split_url(req.url).scheme.lower()
        if scheme == "file" or scheme.endswith("+file") or not scheme:
            raise LineError(
                f"local path {req.url!r} is not in the image's build context: publish it or use a URL"
            )
        if scheme not in ("https", "http") and not scheme.startswith(_VCS_PREFIXES):
            raise LineError(f"URL scheme {scheme!r} is not supported: use https://, or git+https:// for VCS")
        check_url(req.url, allow_ssh_user=scheme.endswith("+ssh"))
    text = str(req)
    if text.endswith("\\") or _FILE_SYNTAX_RE.search(text):
        raise LineError(
            f"{text!r} would not read back unchanged from the requirements file envbuild writes: pip takes "
            "' #' as a comment, ' -' as an option and a trailing '\\' as a line continuation"
        )
    return text, canonicalize_name(req.name)


def _bare_location(text: str) -> str:
    """pip accepts a bare URL or path as a requirement; rewrite URLs as ``name @ url``, refuse paths."""
    is_url = SCHEME_RE.match(text.strip()) is not None
    # pip's split: a URL's marker follows "; " (a URL may hold ";"), a plain name's follows ";"
    location, sep, marker = text.partition("; " if is_url else ";")
    location = location.strip()
    if not is_url:
        looks_like_path = location.startswith((".", "/", "~")) or "/" in location or "\\" in location
        if looks_like_path or location.endswith((".whl", ".zip", ".tar.gz", ".tar.bz2")):
            raise LineError(
                f"local path {location!r} is not in the image's build context: publish it or use a URL"
            )
        return text  # a plain PEP 508 string
    if location.lower().startswith("file:") or "+file:" in location.lower():
        raise LineError(
            f"local path {location!r} is not in the image's build context: publish it or use a URL"
        )
    url, _, fragment = location.partition("#")
    params = dict(p.split("=", 1) for p in fragment.split("&") if "=" in p)
    name = params.get("egg")
    kept = "&".join(p for p in fragment.split("&") if p and not p.startswith("egg="))
    if name is None:
        filename = unquote(_split_url(url).path.rsplit("/", 1)[-1])  # torch-2.1.2%2Bcu121-...whl
        try:
            if filename.endswith(".whl"):
                name = str(parse_wheel_filename(filename)[0])
            else:
                name = str(parse_sdist_filename(filename)[0])
        except (InvalidWheelFilename, InvalidSdistFilename):
            raise LineError(
                f"cannot tell the project name of {location!r}: write 'name @ URL' or add '#egg=name'"
            ) from None
    target = url + (f"#{kept}" if kept else "")
    return f"{name} @ {target}" + (f" ; {marker}" if sep else "")
