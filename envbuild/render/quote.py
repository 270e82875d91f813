"""Quoting for every place a profile value can land: shell words, Dockerfile strings, Markdown.

Templates never quote; the view model calls these.  Each function refuses control characters
(newlines included) instead of trying to escape them: no legitimate value needs one, and a newline
is how an injected ``RUN`` line would get in.
"""

from __future__ import annotations

import re
import shlex

from envbuild.errors import BundleError

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>#|~])")  # [ ] escaped, so ( ) ! cannot form links


def check_plain(value: str, what: str) -> str:
    """Return ``value`` unchanged, or raise when it holds a control character."""
    match = _CONTROL.search(value)
    if match:
        raise BundleError(f"{what}: control character {match.group()!r} is not allowed in {value!r}")
    return value


def sh(value: str, what: str) -> str:
    """One POSIX shell word (single quotes when needed)."""
    return shlex.quote(check_plain(value, what))


def docker_str(value: str, what: str) -> str:
    """A double-quoted Dockerfile word for ``ENV``/``LABEL``/``ARG``.

    BuildKit and the classic builder treat ``\\"``, ``\\$`` and ``\\\\`` inside double quotes as
    escapes and expand ``$VAR``; escaping ``$`` keeps a profile value literal.
    """
    check_plain(value, what)
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return f'"{escaped}"'


def md(value: str, what: str) -> str:
    """Inline Markdown text with every formatting character escaped (safe in table cells too)."""
    return _MD_SPECIAL.sub(r"\\\1", check_plain(value, what))


def md_code(value: str, what: str) -> str:
    """An inline code span that cannot be broken out of (fence longer than any backtick run)."""
    check_plain(value, what)
    longest = max((len(run) for run in re.findall(r"`+", value)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if value.startswith("`") or value.endswith("`") or not value else ""
    cell = f"{fence}{pad}{value}{pad}{fence}"
    return cell.replace("|", "\\|")


def comment(value: str, what: str) -> str:
    """Text for a ``#`` comment line (requirements files, Dockerfiles): one line, stripped."""
    return check_plain(value, what).strip()
