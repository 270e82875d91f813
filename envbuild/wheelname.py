"""Wheel and sdist file names, and the wheel tags a CPython image accepts, without ``packaging.tags``.

``packaging.utils`` imports ``packaging.tags``, and with it ``logging``, ``platform``, ``subprocess``,
``sysconfig`` and its manylinux/musllinux probes: about 18 ms of a cold ``envbuild check`` on a small
machine, paid only to read the tags in a wheel URL's file name.  This module reads them itself, with
the rules of the wheel specification as ``packaging.utils.parse_wheel_filename`` applies them
(``tests/test_wheelname.py`` holds the two to the same answers), and lists the tags that pip accepts on
the *image's* interpreter: a standard (non-debug, GIL) CPython build, whatever interpreter runs envbuild.
(``packaging.tags.cpython_tags`` derives the ABI from the running interpreter, so on a debug or
free-threaded Python it would describe that build rather than the image's.)

Versions are packaging's :class:`~packaging.version.Version`, as before.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from packaging.utils import NormalizedName
    from packaging.version import Version

__all__ = [
    "InvalidFilename",
    "Tag",
    "canonicalize_name",
    "cpython_image_tags",
    "parse_sdist_filename",
    "parse_tag",
    "parse_wheel_filename",
]

_NAME_RE = re.compile(r"[\w.]+")  # PEP 427: the escaped project name (\w: Unicode word characters)
_CANONICAL_RE = re.compile(r"[-_.]+")


class InvalidFilename(ValueError):
    """Not a wheel (or sdist) file name; :attr:`reason` says which part is wrong."""

    def __init__(self, filename: str, reason: str) -> None:
        super().__init__(f"{filename!r}: {reason}")
        self.filename = filename
        self.reason = reason


class Tag(NamedTuple):
    """One ``interpreter-abi-platform`` wheel tag, lower-cased (as pip compares them)."""

    interpreter: str
    abi: str
    platform: str

    def __str__(self) -> str:
        return f"{self.interpreter}-{self.abi}-{self.platform}"


def canonicalize_name(name: str) -> NormalizedName:
    """PEP 503 normalisation (``Foo.Bar_baz`` -> ``foo-bar-baz``), as ``packaging.utils`` does it."""
    return _CANONICAL_RE.sub("-", name).lower()  # type: ignore[return-value]


def parse_tag(text: str) -> frozenset[Tag]:
    """The tags of a (possibly compressed) tag set such as ``py2.py3-none-any``."""
    components = [component.split(".") for component in text.split("-")]
    if len(components) != 3:
        raise InvalidFilename(text, "a tag must have exactly three components")
    for parts in components:
        if "" in parts:
            raise InvalidFilename(text, f"the tag has an empty component: {'.'.join(parts)!r}")
    interpreters, abis, platforms = components
    for interpreter in interpreters:
        if not interpreter.isidentifier():
            raise InvalidFilename(text, f"the tag has an invalid interpreter: {interpreter!r}")
    return frozenset(
        Tag(interpreter.lower(), abi.lower(), platform.lower())
        for interpreter in interpreters
        for abi in abis
        for platform in platforms
    )


def parse_wheel_filename(
    filename: str,
) -> tuple[NormalizedName, Version, tuple[()] | tuple[int, str], frozenset[Tag]]:
    """``(canonical name, version, build tag, tags)`` of a wheel file name, as packaging reads it.

    The build tag is ``()`` or ``(leading number, rest)``.  Raises :class:`InvalidFilename`."""
    from packaging.version import InvalidVersion, Version

    if not filename.endswith(".whl"):
        raise InvalidFilename(filename, "not a wheel: the extension must be '.whl'")
    stem = filename[:-4]
    dashes = stem.count("-")
    if dashes not in (4, 5):
        raise InvalidFilename(
            filename,
            "a wheel name has 5 or 6 dash-separated parts (name-version[-build]-python-abi-platform), "
            f"this one {dashes + 1}",
        )
    parts = stem.split("-", dashes - 2)
    name = parts[0]
    if "__" in name or _NAME_RE.fullmatch(name) is None:
        raise InvalidFilename(filename, f"invalid project name {name!r}")
    try:
        version = Version(parts[1])
    except InvalidVersion:
        raise InvalidFilename(filename, f"invalid version {parts[1]!r}") from None
    build: tuple[()] | tuple[int, str] = ()
    if dashes == 5:
        digits = len(parts[2]) - len(parts[2].lstrip("0123456789"))
        if not digits:
            raise InvalidFilename(filename, f"build number {parts[2]!r} must start with a digit")
        build = (int(parts[2][:digits]), parts[2][digits:])
    try:
        tags = parse_tag(parts[-1])
    except InvalidFilename as exc:
        raise InvalidFilename(filename, f"tag {exc.filename!r}: {exc.reason}") from None
    return canonicalize_name(name), version, build, tags


def parse_sdist_filename(filename: str) -> tuple[NormalizedName, Version]:
    """``(canonical name, version)`` of an sdist file name (``.tar.gz``, ``.zip``), as packaging reads it."""
    from packaging.version import InvalidVersion, Version

    for extension in (".tar.gz", ".zip"):
        if filename.endswith(extension):
            stem = filename[: -len(extension)]
            break
    else:
        raise InvalidFilename(filename, "not an sdist: the extension must be '.tar.gz' or '.zip'")
    name, dash, version_text = stem.rpartition("-")
    if not dash:
        raise InvalidFilename(filename, "no '-' between the project name and the version")
    if not name:
        raise InvalidFilename(filename, "the project name is empty")
    try:
        version = Version(version_text)
    except InvalidVersion:
        raise InvalidFilename(filename, f"invalid version {version_text!r}") from None
    return canonicalize_name(name), version


def _interpreter_range(major: int, minor: int) -> Iterator[str]:
    yield f"py{major}{minor}"
    yield f"py{major}"
    for older in range(minor - 1, -1, -1):
        yield f"py{major}{older}"


def cpython_image_tags(python: tuple[int, int], platforms: Iterable[str]) -> set[Tag]:
    """Every tag pip accepts for a standard CPython ``python`` build on ``platforms``.

    The same set as ``packaging.tags.cpython_tags`` plus ``compatible_tags`` give for a non-debug,
    GIL build: ``cpXY-cpXY``, ``abi3`` for this and every older CPython 3, ``none``, ``pyXY``/``py3``
    with ``none``, and the ``any`` platform."""
    major, minor = python
    platforms = list(platforms)
    cp = f"cp{major}{minor}"
    tags = {Tag(cp, abi, platform) for abi in (cp, "abi3", "none") for platform in platforms}
    tags |= {Tag(f"cp{major}{older}", "abi3", p) for older in range(minor - 1, 1, -1) for p in platforms}
    for interpreter in _interpreter_range(major, minor):
        tags |= {Tag(interpreter, "none", platform) for platform in platforms}
        tags.add(Tag(interpreter, "none", "any"))
    tags.add(Tag(cp, "none", "any"))
    return tags
