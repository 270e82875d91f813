"""PEP 508 requirement strings and PEP 503 project names, without packaging's parser on the common path.

``packaging.requirements`` imports packaging's tokenizer, markers and ``packaging.utils``, which
imports ``packaging.tags`` and with it ``subprocess``, ``logging``, ``platform``, ``dataclasses`` and
``inspect``: about a third of a cold ``envbuild check`` on a small machine, spent on every run though
nearly every requirement envbuild reads is of a plain form (the profile's packages, its requirement
files, the catalog's ``Requires-Dist`` pins).

:func:`parse` reads that plain form itself, with the grammar of PEP 508: a name, extras, and either
comma-separated version specifiers (bare or in parentheses, each checked by packaging's own
:class:`~packaging.specifiers.SpecifierSet`) or ``@ URL``, then optionally ``; marker``.  It reads the
markers that requirement files hold (``python_version < "3.12"``, ``sys_platform == "linux"``, joined by
``and``/``or``) as :class:`PlainMarker`, and hands everything else (parentheses, ``extra``, the legacy
dotted names, comparisons whose meaning changed between packaging releases, anything malformed) to
packaging's :class:`~packaging.requirements.Requirement`, imported then.
Both give the same name, extras, specifier, URL, marker text, marker verdict and ``str()``:
``tests/test_pyreq.py`` holds the two to that over the requirement corpus and generated markers.
Wheel and sdist file names, and PEP 503 names, are packaging.utils's (re-exported here).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Protocol

from packaging.specifiers import InvalidSpecifier, Specifier, SpecifierSet
from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename

if TYPE_CHECKING:
    from collections.abc import Mapping

    from packaging.markers import Marker

__all__ = [
    "InvalidRequirement",
    "ParsedRequirement",
    "PlainMarker",
    "applies_on_image",
    "canonicalize_name",
    "marker_env",
    "parse",
    "parse_sdist_filename",
    "parse_wheel_filename",
]

_NAME_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
_OPERATOR_START = ("=", "~", "!", "<", ">")
_NOT_IN_SPECIFIERS = frozenset("@()[]")  # a URL or nesting: packaging's to read (the marker is split off)
_BLANKS = frozenset(" \t")


class InvalidRequirement(ValueError):
    """Not a PEP 508 requirement; the message is packaging's."""


class ParsedRequirement(Protocol):
    """What envbuild reads of a requirement: :class:`PlainRequirement` or packaging's ``Requirement``."""

    @property
    def name(self) -> str: ...
    @property
    def extras(self) -> set[str]: ...
    @property
    def specifier(self) -> SpecifierSet: ...
    @property
    def url(self) -> str | None: ...
    @property
    def marker(self) -> Marker | PlainMarker | None: ...


# PEP 508's marker variables under their canonical names (packaging's own reading of the aliases
# ``os.name``, ``python_implementation``, ... and of ``extra`` stays packaging's)
_MARKER_VARIABLES = frozenset(
    {
        "implementation_name",
        "implementation_version",
        "os_name",
        "platform_machine",
        "platform_python_implementation",
        "platform_release",
        "platform_system",
        "platform_version",
        "python_full_version",
        "python_version",
        "sys_platform",
    }
)
# compared as versions (packaging's MARKERS_REQUIRING_VERSION) when the literal makes a valid specifier
_VERSION_VARIABLES = frozenset(
    {"implementation_version", "platform_release", "python_full_version", "python_version"}
)
_COMPARISONS = ("<=", ">=", "==", "!=", "~=", "<", ">")  # two-character ones first; "===" is packaging's
_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


class UndefinedMarker(ValueError):
    """A marker names a variable the environment given to :meth:`PlainMarker.evaluate` lacks."""


class _Atom:
    """``variable op "value"``, or ``"value" in variable`` (``reverse``)."""

    __slots__ = ("op", "reverse", "spec", "value", "variable")

    def __init__(self, variable: str, op: str, value: str, reverse: bool, spec: Specifier | None) -> None:
        self.variable, self.op, self.value, self.reverse, self.spec = variable, op, value, reverse, spec

    def holds(self, environment: Mapping[str, str]) -> bool:
        try:
            actual = environment[self.variable]
        except KeyError:
            raise UndefinedMarker(self.variable) from None
        if self.spec is not None:  # a version variable against a valid specifier: packaging's rule
            return self.spec.contains(actual, prereleases=True)
        if self.op in ("in", "not in"):
            inside = self.value in actual if self.reverse else actual in self.value
            return inside if self.op == "in" else not inside
        return (actual == self.value) if self.op == "==" else (actual != self.value)

    def __str__(self) -> str:
        if self.reverse:
            return f'"{self.value}" {self.op} {self.variable}'
        return f'{self.variable} {self.op} "{self.value}"'


class PlainMarker:
    """An environment marker of comparisons joined by ``and``/``or`` (``and`` binding tighter)."""

    __slots__ = ("_groups", "_text")

    def __init__(self, groups: list[list[_Atom]]) -> None:
        self._groups = groups
        self._text = " or ".join(" and ".join(map(str, group)) for group in groups)

    def evaluate(self, environment: Mapping[str, str]) -> bool:
        """Whether the marker holds in ``environment`` (every variable it names must be there)."""
        verdicts = [[atom.holds(environment) for atom in group] for group in self._groups]
        return any(all(group) for group in verdicts)

    def __str__(self) -> str:  # as packaging's Marker writes it
        return self._text

    def __repr__(self) -> str:
        return f"<PlainMarker({self._text!r})>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PlainMarker) and other._text == self._text

    def __hash__(self) -> int:
        return hash(self._text)


def _skip_blanks(text: str, i: int) -> int:
    while i < len(text) and text[i] in _BLANKS:
        i += 1
    return i


def _word(text: str, i: int) -> str:
    """The run of word characters at ``i`` (empty when there is none)."""
    j = i
    while j < len(text) and text[j] in _WORD:
        j += 1
    return text[i:j]


def _operand(text: str, i: int) -> tuple[str, bool, int] | None:
    """``(name or value, is a quoted value, end)`` of the operand at ``i``; None when it is neither."""
    if i < len(text) and text[i] in "'\"":
        close = text.find(text[i], i + 1)
        if close < 0:
            return None
        value = text[i + 1 : close]
        if "'" in value or '"' in value or "\\" in value:
            return None  # quoting packaging would write differently, or an escape: packaging's to read
        return value, True, close + 1
    name = _word(text, i)
    return (name, False, i + len(name)) if name in _MARKER_VARIABLES else None


def _operator(text: str, i: int) -> tuple[str, int] | None:
    if text.startswith("===", i):
        return None
    for op in _COMPARISONS:
        if text.startswith(op, i):
            return op, i + len(op)
    word = _word(text, i)
    if word == "in":
        return "in", i + 2
    if word == "not":
        j = _skip_blanks(text, i + 3)
        if j > i + 3 and _word(text, j) == "in":
            return "not in", j + 2
    return None


def _atom(text: str, i: int) -> tuple[_Atom, int] | None:
    left = _operand(text, _skip_blanks(text, i))
    if left is None:
        return None
    found = _operator(text, _skip_blanks(text, left[2]))
    if found is None:
        return None
    op, j = found
    right = _operand(text, _skip_blanks(text, j))
    if right is None or left[1] == right[1]:
        return None  # two variables or two values: packaging's to judge
    end = right[2]
    if left[1]:  # "value" op variable: only membership, whose meaning no packaging release changed
        return (_Atom(right[0], op, left[0], True, None), end) if op in ("in", "not in") else None
    variable, value = left[0], right[0]
    if op in ("in", "not in"):
        return _Atom(variable, op, value, False, None), end
    if variable in _VERSION_VARIABLES:
        try:
            return _Atom(variable, op, value, False, Specifier(f"{op}{value}")), end
        except InvalidSpecifier:
            return None  # not a version: packaging falls back to string rules that differ by release
    if op in ("==", "!="):
        return _Atom(variable, op, value, False, None), end
    return None


def _plain_marker(text: str) -> PlainMarker | None:
    """The marker ``text`` read step by step (linear time), or None for anything outside the plain form."""
    groups: list[list[_Atom]] = [[]]
    i = 0
    while True:
        found = _atom(text, i)
        if found is None:
            return None
        atom, i = found
        if i < len(text) and text[i] in _WORD:
            return None  # "...'3.8'andx": no word boundary
        groups[-1].append(atom)
        i = _skip_blanks(text, i)
        if i == len(text):
            return PlainMarker(groups)
        joiner = _word(text, i)
        if joiner == "or":
            groups.append([])
        elif joiner != "and":
            return None
        i += len(joiner)


class PlainRequirement:
    """``name[extras]<specifiers>`` or ``name[extras] @ URL``, with a :class:`PlainMarker` or none."""

    __slots__ = ("extras", "marker", "name", "specifier", "url")

    def __init__(
        self,
        name: str,
        extras: set[str],
        specifier: SpecifierSet,
        url: str | None = None,
        marker: PlainMarker | None = None,
    ) -> None:
        self.name = name
        self.extras = extras
        self.specifier = specifier
        self.url = url
        self.marker = marker

    def __str__(self) -> str:  # as packaging's Requirement writes it
        extras = f"[{','.join(sorted(self.extras))}]" if self.extras else ""
        text = f"{self.name}{extras}{self.specifier}"
        if self.url:
            text += f" @ {self.url}" + (" " if self.marker else "")
        return text + (f"; {self.marker}" if self.marker else "")

    def __repr__(self) -> str:
        return f"<PlainRequirement({str(self)!r})>"


def _plain(text: str) -> PlainRequirement | None:
    """The plain form, read step by step in linear time (no regex backtracking over a hostile line)."""
    if not text.isascii() or not text.replace("\t", " ").isprintable():
        return None  # packaging's whitespace is space and tab only; let it judge anything else
    text = text.strip(" \t")
    match = _NAME_RE.match(text)
    if match is None:
        return None
    name, rest = match[0], text[match.end() :].lstrip(" \t")
    extras: set[str] = set()
    if rest.startswith("["):
        close = rest.find("]")
        if close < 0:
            return None
        inside = rest[1:close].strip(" \t")
        if inside:
            parts = [part.strip(" \t") for part in inside.split(",")]
            if not all(_NAME_RE.fullmatch(part) for part in parts):
                return None
            extras = set(parts)
        rest = rest[close + 1 :].lstrip(" \t")
    marker: PlainMarker | None = None
    if rest.startswith("@"):  # "@ URL": packaging's URL is one run of non-blanks, then only " ; marker"
        url = rest[1:].lstrip(" \t")
        end = next((k for k, char in enumerate(url) if char in _BLANKS), len(url))
        url, tail = url[:end], url[end:].lstrip(" \t")
        if not url or (tail and not tail.startswith(";")):
            return None
        if tail and (marker := _plain_marker(tail[1:])) is None:
            return None
        return PlainRequirement(name, extras, SpecifierSet(), url, marker)
    rest, semicolon, marker_text = rest.partition(";")
    if semicolon:
        if (marker := _plain_marker(marker_text)) is None:
            return None
        rest = rest.rstrip(" \t")
    if rest.startswith("(") and rest.endswith(")"):
        rest = rest[1:-1].strip(" \t")
    if rest and (not rest.startswith(_OPERATOR_START) or not _NOT_IN_SPECIFIERS.isdisjoint(rest)):
        return None
    if rest and not all(part.strip(" \t") for part in rest.split(",")):
        return None  # "==1," : packaging's grammar refuses the empty specifier; let it say so
    try:
        specifier = SpecifierSet(rest)
    except InvalidSpecifier:
        return None
    return PlainRequirement(name, extras, specifier, None, marker)


def parse(text: str) -> ParsedRequirement:
    """The requirement ``text`` (PEP 508), or :class:`InvalidRequirement` with packaging's reason."""
    plain = _plain(text)
    if plain is not None:
        return plain
    from packaging.requirements import InvalidRequirement as PackagingInvalid
    from packaging.requirements import Requirement

    try:
        return Requirement(text)
    except PackagingInvalid as exc:
        raise InvalidRequirement(str(exc)) from None


def marker_env(python: str, machine: str = "x86_64") -> dict[str, str]:
    """PEP 508 marker variables of the image's interpreter (CPython ``python`` on Linux)."""
    return {
        "implementation_name": "cpython",
        "implementation_version": f"{python}.0",
        "os_name": "posix",
        "platform_machine": machine,
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_system": "Linux",
        "platform_version": "",
        "python_full_version": f"{python}.0",
        "python_version": python,
        "sys_platform": "linux",
        "extra": "",
    }


def applies_on_image(req: ParsedRequirement, python: str) -> bool:
    """False when the requirement's environment marker excludes the image (pip would skip it)."""
    if req.marker is None:
        return True
    if isinstance(req.marker, PlainMarker):
        try:
            return req.marker.evaluate(marker_env(python))
        except UndefinedMarker:  # undecidable: assume it applies
            return True
    from packaging.markers import UndefinedComparison, UndefinedEnvironmentName  # loaded with the marker

    try:
        return bool(req.marker.evaluate(marker_env(python)))
    except (UndefinedComparison, UndefinedEnvironmentName):  # undecidable: assume it applies
        return True
