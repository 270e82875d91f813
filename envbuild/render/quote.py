"""Quoting for every place a profile value can land: shell words, Dockerfile strings, Markdown.

Templates never quote; the view model calls these.  Each function refuses control characters and
every line break by Python's rules (``str.splitlines``: LF, CR, VT, FF, FS, GS, RS, NEL U+0085,
U+2028, U+2029) instead of trying to escape them: no legitimate value needs one, a newline is how an
injected ``RUN`` line would get in, and pip splits a requirements file with ``str.splitlines``, so a
U+2028 in a comment would start a line pip reads as an option.

:func:`check_file` is the last look at a generated text file before it is written: its lines are the
same whether split at LF or by Python's rules, and (for a requirements file) every option line pip
would read is one the writer emitted.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection, Mapping

from envbuild.errors import BundleError
from envbuild.profile.fields import line_break

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>#|~])")  # [ ] escaped, so ( ) ! cannot form links


def check_plain(value: str, what: str) -> str:
    """Return ``value`` unchanged, or raise when it holds a control character or a line break."""
    match = _CONTROL.search(value)
    if match:
        raise BundleError(f"{what}: control character {match.group()!r} is not allowed in {value!r}")
    found = line_break(value)
    if found is not None:
        raise BundleError(f"{what}: line break {found!r} is not allowed in {value!r}")
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


def check_file(name: str, text: str, emitted: Collection[str] | None = None) -> str:
    """Return ``text`` (a generated file) unchanged, or raise :class:`BundleError` when a line of it is
    more than one line by Python's rules, or (``emitted``: the lines the writer yielded, for a
    requirements file) pip would read an option line the writer did not emit.

    Values are checked where they are quoted; this is the last look before the file is written, so a
    failure here is a bug in envbuild, and nothing is written."""
    lines = text.split("\n")
    if lines and not lines[-1]:
        lines.pop()
    if text.splitlines() != lines:
        number, found = next((n, c) for n, line in enumerate(lines, 1) if (c := line_break(line)))
        raise BundleError(
            f"{name}: line {number} holds the line break {found!r} (a bug in envbuild: every value is "
            "checked where it is written); nothing was written"
        )
    if emitted is not None:
        allowed = frozenset(emitted)
        for number, line in enumerate(lines, start=1):
            if line.strip().startswith("-") and line not in allowed:
                raise BundleError(
                    f"{name}: line {number} is an option pip would read that envbuild did not write: "
                    f"{line!r} (a bug in envbuild); nothing was written"
                )
    return text


# The text files render and lock write (JSON files are not: a line break in a JSON string is data).
GENERATED_TEXT = ("Dockerfile", ".dockerignore", "README.md", "requirements-rebuild.txt", "docker-bake.hcl")


def check_generated(files: Mapping[str, bytes]) -> None:
    """:func:`check_file` on each generated text file among ``files`` (relative path -> bytes)."""
    for name in GENERATED_TEXT:
        if name in files:
            check_file(name, files[name].decode("utf-8", "replace"))
