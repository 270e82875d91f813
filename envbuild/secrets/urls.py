"""Secrets inside a URL: the one rule for the user info, the query and the path, and the redacted form.

* **User info** (RFC 3986 3.2.1): a password in any form (``user:pass@``, ``:pw@``), or a lone token
  on a non-ssh URL (``https://TOKEN@host``).  ``git+ssh://git@host`` names the account only.
* **Query**: a parameter whose name is secret by the word list (:mod:`envbuild.secrets.names`:
  ``token``, ``access_token``, ``key``, ``api_key``, ``password`` ...) or is a signature (``sig``,
  ``signature``, ``X-Amz-Signature``, ``X-Goog-Signature``, ``X-Amz-Credential``), with a value.
* **Path**, on hosts that take an access token as a path segment: Cloudsmith
  (``dl.cloudsmith.io/<token>/<org>/<repo>/``, docs.cloudsmith.com "Entitlement tokens"),
  packagecloud (``packagecloud.io/priv/<token>/<user>/<repo>/``, packagecloud.io/docs "Private
  repositories") and Gemfury (``pypi.fury.io/<token>/<account>/``, gemfury.com/help "Repository
  URLs"): a long segment mixing letters and digits (or cases) in the token's place.

``${VAR}``/``$VAR`` references, ``<placeholders>``, ``***`` and ``...`` are not secrets.  The parse is
by hand (no :func:`urllib.parse.urlsplit`, which raises on a malformed port or bracket): it never
fails, and it is linear in the URL's length.
"""

from __future__ import annotations

import re
from typing import NamedTuple
from urllib.parse import unquote

from envbuild.secrets.formats import tokens
from envbuild.secrets.names import name_reason

# Stand-ins that hold no secret: a redacted form ("***", "[REDACTED]"), an elision, a <placeholder>
# or a ${VAR}/$VAR reference (a template, filled in at run time).
PLACEHOLDER_RE = re.compile(
    r"\**|\.{3}|\[REDACTED\]|<[^<>]*>|\$\{[A-Za-z_][A-Za-z0-9_]*\}|\$[A-Za-z_][A-Za-z0-9_]*"
)
_SIGNATURE_NAMES = frozenset({"SIG", "SIGNATURE", "X_AMZ_SIGNATURE", "X_AMZ_CREDENTIAL", "X_GOOG_SIGNATURE"})
_TOKEN_SEGMENT_RE = re.compile(r"[A-Za-z0-9_.-]{12,}")
_SCHEME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+.-")
_TOKEN_HOST_MARKS = ("cloudsmith.io", "packagecloud.io", "fury.io")
# Where a URL in free text ends: whitespace, quotes, angle brackets, a backtick or a backslash.
_URL_BODY_RE = re.compile(r"[^\s\"'<>`\\]*")


class Part(NamedTuple):
    """A secret inside a URL: ``url[start:end]``; ``kind`` is ``user``, ``password``, ``query`` (then
    ``name`` is the parameter's name) or ``path``."""

    start: int
    end: int
    kind: str
    name: str = ""


def query_name_reason(name: str) -> str | None:
    """Why a query parameter's name says its value is secret (``access_token``, ``sig``), or ``None``."""
    if unquote(name).upper().replace("-", "_") in _SIGNATURE_NAMES:
        return "is a signature"
    return name_reason(unquote(name))


def _token_shaped(segment: str) -> bool:
    """Long, and mixing at least two of lower case, upper case and digits (an org name rarely does)."""
    if not _TOKEN_SEGMENT_RE.fullmatch(segment):
        return False
    kinds = (any(c.islower() for c in segment), any(c.isupper() for c in segment))
    return sum((*kinds, any(c.isdigit() for c in segment))) >= 2


def _path_token(host: str, path: str) -> int | None:
    """Index (among ``path``'s segments, split on ``/`` without the leading one) of the token segment."""
    segments = path.split("/")[1:]
    if host == "dl.cloudsmith.io":
        index = 0 if segments and segments[0] not in ("public", "basic") else None
    elif host in ("packagecloud.io", "packages.packagecloud.io"):
        index = 1 if len(segments) > 1 and segments[0] == "priv" else None
    elif host == "fury.io" or host.endswith(".fury.io"):
        index = 0 if len(segments) > 1 and segments[1] else None
    else:
        return None
    return index if index is not None and _token_shaped(segments[index]) else None


def url_parts(url: str) -> list[Part]:
    """Every secret inside ``url`` (``scheme://...``), in order.  Not a URL: none."""
    mark = url.find("://")
    if mark < 1:
        return []
    scheme = url[:mark]
    auth_start = mark + 3
    auth_end = len(url)
    for stop in "/?#":
        found = url.find(stop, auth_start)
        if found != -1:
            auth_end = min(auth_end, found)
    parts: list[Part] = []
    at = url.rfind("@", auth_start, auth_end)
    if at != -1:
        info = url[auth_start:at]
        user, colon, password = info.partition(":")
        if colon and not PLACEHOLDER_RE.fullmatch(password):
            split = auth_start + len(user)
            parts += [Part(auth_start, split, "user"), Part(split + 1, at, "password")]
        elif not colon and not scheme.lower().endswith("ssh") and not PLACEHOLDER_RE.fullmatch(user):
            parts.append(Part(auth_start, at, "user"))
    host = url[at + 1 if at != -1 else auth_start : auth_end].rsplit(":", 1)[0].lower()
    fragment = url.find("#", auth_end)
    end = fragment if fragment != -1 else len(url)
    query = url.find("?", auth_end, end)
    path_end = query if query != -1 else end
    index = _path_token(host, url[auth_end:path_end])
    if index is not None:
        start = auth_end
        for _ in range(index + 1):
            start = url.index("/", start) + 1
        segment_end = url.find("/", start, path_end)
        parts.append(Part(start, segment_end if segment_end != -1 else path_end, "path"))
    if query != -1:
        pos = query + 1
        while pos <= end:
            amp = url.find("&", pos, end)
            item_end = amp if amp != -1 else end
            name, eq, value = url[pos:item_end].partition("=")
            secret = eq and value and (query_name_reason(name) or tokens(unquote(value)))
            if secret and not PLACEHOLDER_RE.fullmatch(value):
                parts.append(Part(pos + len(name) + 1, item_end, "query", unquote(name)))
            pos = item_end + 1
    return parts


def url_reason(url: str) -> str | None:
    """What secret ``url`` carries (``"a URL with a password"``), or ``None``."""
    parts = url_parts(url)
    kinds = {part.kind for part in parts}
    if "password" in kinds:
        return "a URL with a password"
    if "user" in kinds:
        return "a URL with a token as its user name"
    if "path" in kinds:
        return "a URL with an access token in its path"
    names = [part.name for part in parts if part.kind == "query"]
    return f"a URL with a secret in its query ({names[0]!r})" if names else None


def redact_url(url: str, mask: str = "***") -> str:
    """``url`` with its user info, secret query values and path tokens replaced by ``mask``
    (``https://user:pw@host/x?token=abc`` -> ``https://***@host/x?token=***``)."""
    parts = url_parts(url)
    if not parts:
        return url
    out: list[str] = []
    last = 0
    for index, part in enumerate(parts):
        if part.kind == "password":
            continue  # the user info goes whole, with its "user" part
        end = part.end
        if part.kind == "user" and index + 1 < len(parts) and parts[index + 1].kind == "password":
            end = parts[index + 1].end
        out += [url[last : part.start], mask]
        last = end
    out.append(url[last:])
    return "".join(out)


def url_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each ``scheme://...`` URL in free text that may hold a secret (user info, a query,
    or a token-in-path host), found from each ``://`` with :meth:`str.find` (linear time)."""
    found: list[tuple[int, int]] = []
    pos = text.find("://")
    while pos != -1:
        body = _URL_BODY_RE.match(text, pos + 3)
        end = body.end() if body else pos + 3
        if end > pos + 3 and _may_hold_secret(text[pos + 3 : end]):
            start = pos
            while start > max(0, pos - 64) and text[start - 1] in _SCHEME_CHARS:
                start -= 1
            while start < pos and not text[start].isalpha():
                start += 1
            if start < pos:
                found.append((start, end))
        pos = text.find("://", max(end, pos + 3))
    return found


def _may_hold_secret(rest: str) -> bool:
    return "@" in rest or "?" in rest or any(host in rest for host in _TOKEN_HOST_MARKS)
