"""envbuild.wheelname reads wheel and sdist file names as packaging does, and lists the tags pip accepts
on a standard CPython image as packaging's ``cpython_tags`` + ``compatible_tags`` do, without importing
``packaging.tags``."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest
from packaging.tags import compatible_tags, cpython_tags
from packaging.utils import InvalidSdistFilename, InvalidWheelFilename
from packaging.utils import parse_sdist_filename as packaging_sdist
from packaging.utils import parse_wheel_filename as packaging_wheel

from envbuild import wheelname
from envbuild.plan.versions import image_platforms

TESTS = Path(__file__).parent


def _recorded_wheel_names() -> list[str]:
    """Every wheel file name in the responses recorded from the real PyPI (tests/data/index-recorded)."""
    names: set[str] = set()
    for path in (TESTS / "data/index-recorded").rglob("*.json"):
        for found in re.findall(r"[A-Za-z0-9_.+%-]+\.whl", path.read_text(encoding="utf-8")):
            names.add(unquote(found))
    return sorted(names)


WHEELS = _recorded_wheel_names()

# written for this test: the edges of the wheel file name rules, each read by both
WHEEL_EDGES = [
    "foo-1.0-py3-none-any.whl",
    "Foo.Bar_baz-1.0-py2.py3-none-any.whl",
    "foo-1.0-1-py3-none-any.whl",
    "foo-1.0-12abc-py3-none-any.whl",
    "foo-1.0-abc-py3-none-any.whl",
    "foo-1.0-py3-none-any.zip",
    "foo-1.0-py3-none.whl",
    "foo-1.0-1-2-py3-none-any.whl",
    "foo__bar-1.0-py3-none-any.whl",
    "-1.0-py3-none-any.whl",
    "foo-1.0.x-py3-none-any.whl",
    "foo-1.0-py3..py2-none-any.whl",
    "foo-1.0-3py-none-any.whl",
    "foo-1.0-CP312-CP312-Manylinux_2_28_X86_64.whl",
    "foo-1.0-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
    "flash_attn-2.8.3+cu12torch2.7cxx11abiTRUE-cp312-cp312-linux_x86_64.whl",
    "caf\u00e9-1.0-py3-none-any.whl",
    "foo-bar-1.0-py3-none-any.whl",
]
SDIST_EDGES = [
    "foo-1.0.tar.gz",
    "Foo_Bar-2.0rc1.zip",
    "foo-bar-1.0.tar.gz",
    "foo.tar.gz",
    "-1.0.tar.gz",
    "foo-1.0.tar.bz2",
    "foo-x.y.tar.gz",
]


def _theirs_wheel(name: str) -> tuple[object, ...] | None:
    try:
        project, version, build, tags = packaging_wheel(name)
    except InvalidWheelFilename:
        return None
    return project, version, build, {(t.interpreter, t.abi, t.platform) for t in tags}


def _ours_wheel(name: str) -> tuple[object, ...] | None:
    try:
        project, version, build, tags = wheelname.parse_wheel_filename(name)
    except wheelname.InvalidFilename:
        return None
    return project, version, build, {(t.interpreter, t.abi, t.platform) for t in tags}


def test_recorded_wheel_names_read_as_packaging_reads_them() -> None:
    assert len(WHEELS) > 300
    assert [n for n in WHEELS if _ours_wheel(n) != _theirs_wheel(n)] == []
    assert all(_ours_wheel(n) is not None for n in WHEELS)  # real names: all valid


@pytest.mark.parametrize("name", WHEEL_EDGES)
def test_wheel_name_edge_agrees_with_packaging(name: str) -> None:
    assert _ours_wheel(name) == _theirs_wheel(name)


@pytest.mark.parametrize("name", SDIST_EDGES)
def test_sdist_name_edge_agrees_with_packaging(name: str) -> None:
    try:
        theirs: object = packaging_sdist(name)
    except InvalidSdistFilename:
        theirs = None
    try:
        ours: object = wheelname.parse_sdist_filename(name)
    except wheelname.InvalidFilename:
        ours = None
    assert ours == theirs


def test_an_invalid_name_says_which_part_is_wrong() -> None:
    with pytest.raises(wheelname.InvalidFilename, match=r"invalid version 'x\.y'"):
        wheelname.parse_wheel_filename("foo-x.y-py3-none-any.whl")
    with pytest.raises(wheelname.InvalidFilename, match="5 or 6"):
        wheelname.parse_wheel_filename("foo-1.0-any.whl")
    with pytest.raises(wheelname.InvalidFilename, match="invalid interpreter: '3py'"):
        wheelname.parse_wheel_filename("foo-1.0-3py-none-any.whl")


@pytest.mark.parametrize("python", [(3, 8), (3, 10), (3, 12), (3, 13), (3, 14)])
@pytest.mark.parametrize("glibc", ["2.28", "2.31", "2.35", "2.39"])
def test_image_tags_are_packagings_for_a_standard_cpython(python: tuple[int, int], glibc: str) -> None:
    platforms = image_platforms(glibc)
    expected = set(cpython_tags(python, abis=[f"cp{python[0]}{python[1]}"], platforms=platforms))
    expected |= set(compatible_tags(python, interpreter=f"cp{python[0]}{python[1]}", platforms=platforms))
    ours = wheelname.cpython_image_tags(python, platforms)
    assert {(t.interpreter, t.abi, t.platform) for t in expected} == set(ours)
