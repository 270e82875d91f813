"""PEP 508 requirement strings and PEP 503 project names, without packaging's parser on the common path.

``packaging.requirements`` imports packaging's tokenizer, markers and ``packaging.utils``, which
imports ``packaging.tags`` and with it ``subprocess``, ``logging``, ``platform``, ``dataclasses`` and
``inspect``: about a third of a cold ``envbuild check`` on a small machine, spent on every run though
nearly every requirement envbuild reads is of the plain form ``name[extras]<specifiers>`` (the
profile's packages, the catalog's ``Requires-Dist`` pins).

:func:`parse` reads that plain form itself, with the grammar of PEP 508 (names, extras,
comma-separated version specifiers, bare or in parentheses, each checked by packaging's own
:class:`~packaging.specifiers.SpecifierSet`; or ``name[extras] @ URL``), and hands everything else
(environment markers, anything malformed) to packaging's :class:`~packaging.requirements.Requirement`,
imported then.
Both give the same name, extras, specifier, URL and ``str()``: ``tests/test_pyreq.py`` holds the two to
that over the requirement corpus.
Wheel and sdist file names go to packaging too, imported on first use (:func:`parse_wheel_filename`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from envbuild import lazyre

if TYPE_CHECKING:
    from packaging.markers import Marker
    from packaging.tags import Tag
    from packaging.utils import BuildTag, NormalizedName
    from packaging.version import Version

__all__ = [
    "InvalidRequirement",
    "ParsedRequirement",
    "applies_on_image",
    "canonicalize_name",
    "marker_env",
    "parse",
    "parse_sdist_filename",
    "parse_wheel_filename",
]

_NAME_RE = lazyre.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
_OPERATOR_START = ("=", "~", "!", "<", ">")
_NOT_IN_SPECIFIERS = frozenset(";@()[]")  # a URL, a marker, nesting: packaging's to read
_BLANKS = frozenset(" \t")
_CANONICAL_RE = lazyre.compile(r"[-_.]+")


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
    def marker(self) -> Marker | None: ...


class PlainRequirement:
    """``name[extras]<specifiers>`` or ``name[extras] @ URL``: a requirement without a marker."""

    __slots__ = ("extras", "name", "specifier", "url")
    marker: None = None

    def __init__(self, name: str, extras: set[str], specifier: SpecifierSet, url: str | None = None) -> None:
        self.name = name
        self.extras = extras
        self.specifier = specifier
        self.url = url

    def __str__(self) -> str:  # as packaging's Requirement writes it
        extras = f"[{','.join(sorted(self.extras))}]" if self.extras else ""
        return f"{self.name}{extras}{self.specifier}" + (f" @ {self.url}" if self.url else "")

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
    if rest.startswith("@"):  # "@ URL": packaging's URL is one run of non-blanks, then only "; marker"
        url = rest[1:].lstrip(" \t")
        if not url or not _BLANKS.isdisjoint(url):
            return None
        return PlainRequirement(name, extras, SpecifierSet(), url)
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
    return PlainRequirement(name, extras, specifier)


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


def canonicalize_name(name: str) -> NormalizedName:
    """PEP 503 normalisation (``Foo.Bar_baz`` -> ``foo-bar-baz``), as ``packaging.utils`` does it."""
    return _CANONICAL_RE.sub("-", name).lower()  # type: ignore[return-value]


def parse_wheel_filename(filename: str) -> tuple[NormalizedName, Version, BuildTag, frozenset[Tag]]:
    """packaging's wheel file name parser (raises its ``InvalidWheelFilename``, a ValueError)."""
    from packaging.utils import parse_wheel_filename as parse_wheel

    return parse_wheel(filename)


def parse_sdist_filename(filename: str) -> tuple[NormalizedName, Version]:
    """packaging's sdist file name parser (raises its ``InvalidSdistFilename``, a ValueError)."""
    from packaging.utils import parse_sdist_filename as parse_sdist

    return parse_sdist(filename)


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
    from packaging.markers import UndefinedComparison, UndefinedEnvironmentName  # loaded with the marker

    try:
        return bool(req.marker.evaluate(marker_env(python)))
    except (UndefinedComparison, UndefinedEnvironmentName):  # undecidable: assume it applies
        return True
