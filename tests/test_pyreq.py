"""envbuild.pyreq: its own reading of plain requirements (specifiers, or ``@ URL``) agrees with packaging's,
and it falls back to packaging for everything else (markers, malformed text), with packaging's error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import InvalidRequirement as PackagingInvalid
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name as packaging_canonicalize

from envbuild import pyreq

TESTS = Path(__file__).parent
REPO = TESTS.parent


def _corpus_lines() -> list[str]:
    """Every requirement-looking line of the verbatim corpus files and the catalog's recorded pins."""
    lines: list[str] = []
    files = [
        *sorted((TESTS / "corpus").rglob("*.txt")),
        *sorted((TESTS / "data/requirements/real").glob("*.txt")),
    ]
    for path in files:
        for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
            text = raw.split(" #", 1)[0].strip()
            if text and not text.startswith(("#", "-")) and not text.endswith("\\"):
                lines.append(text)
    torch = tomllib.loads((REPO / "envbuild/data/torch.toml").read_text(encoding="utf-8"))
    for table in ("companion", "torch_requires"):
        for row in torch.get(table, []):
            for value in row.values():
                if isinstance(value, list):
                    lines.extend(v for v in value if isinstance(v, str) and not v.startswith("http"))
    return lines


CORPUS = _corpus_lines()

# written for this test: the edges of the plain form, each read by both parsers
EDGES = [
    "numpy",
    "numpy==2.2.6",
    "  numpy == 2.2.6  ",
    "numpy\t>=1.0,\t<2",
    "NumPy>=1.0 , <2.0,!=1.5.*",
    "torch[opt-einsum,Cuda]~=2.7",
    "torch [ a , b ] >=1",
    "torch[]",
    "x===arbitrary-thing",
    "a.b_c-d==1.0+cu128.torch2.9",
    "flash_attn==2.8.3",
    "numpy==1.0,",
    "numpy==1.0,,<2",
    ",numpy",
    "numpy==",
    "numpy=1.0",
    "numpy 1.0",
    "numpy==1.0 <2",
    "numpy[a,]",
    "numpy[a b]",
    "-numpy",
    "numpy-",
    "numpy==1.0\n",
    "numpy\u00a0==1.0",
    "numpy==1.0\u00a0",
    "nümpy==1.0",
    "numpy>=1.0.*",
    "numpy~=1",
    "numpy(>=1.0)",
    "torch (==2.7.1)",
    "torch ( >=2.1 , <3 )",
    "torch ()",
    "torch (==2.7.1",
    "torch ==2.7.1)",
    "numpy; python_version < '3.12'",
    "numpy==1.0;python_version<'3.12'",
    "torch @ https://download.pytorch.org/whl/cu128/torch-2.7.1%2Bcu128-cp312-cp312-manylinux_2_28_x86_64.whl",
    "pkg[extra] @ git+https://github.com/o/r@v1 ; sys_platform == 'linux'",
    "pkg[extra]@git+https://github.com/o/r@v1#egg=pkg",
    "x @ https://h/x.whl;python_version<'3'",
    "x @ https://h/x.whl trailing",
    "x @ ",
    "x @",
    "x>=1 @ https://h/x.whl",
    "x @ https://h/a b.whl",
    "x @ file:///tmp/x-1.0-py3-none-any.whl  ",
    "numpy==2.2.6 # comment",
    "",
    "   ",
]


def _packaging(text: str) -> Requirement | str:
    try:
        return Requirement(text)
    except PackagingInvalid as exc:
        return f"invalid: {exc}"


def _ours(text: str) -> pyreq.ParsedRequirement | str:
    try:
        return pyreq.parse(text)
    except pyreq.InvalidRequirement as exc:
        return f"invalid: {exc}"


def _disagreement(text: str) -> str | None:
    theirs, ours = _packaging(text), _ours(text)
    if isinstance(theirs, str) or isinstance(ours, str):
        return None if ours == theirs else f"{text!r}: packaging {theirs!r}, envbuild {ours!r}"
    mine = (ours.name, ours.extras, ours.specifier, ours.url, ours.marker, str(ours))
    if mine != (theirs.name, theirs.extras, theirs.specifier, theirs.url, theirs.marker, str(theirs)):
        return f"{text!r}: packaging {theirs!r}, envbuild {ours!r}"
    return None


@pytest.mark.parametrize("text", EDGES)
def test_edge_agrees_with_packaging(text: str) -> None:
    assert _disagreement(text) is None


def test_corpus_agrees_with_packaging() -> None:
    assert len(CORPUS) > 300
    assert [d for d in map(_disagreement, CORPUS) if d] == []
    # and the plain reader did the work: every valid line without a marker is read plain
    parsed = [(t, _packaging(t)) for t in CORPUS]
    plain = [t for t, req in parsed if not isinstance(req, str) and req.marker is None]
    assert len(plain) > 250 and any("@" in t for t in plain)
    assert [t for t in plain if not isinstance(pyreq.parse(t), pyreq.PlainRequirement)] == []


def test_plain_form_is_read_without_packaging_requirements() -> None:
    """The point of the module: a plain requirement does not import packaging's parser or tags."""
    code = (
        "import sys; from envbuild import pyreq\n"
        "r = pyreq.parse('torchvision[x]>=0.22,<0.23'); assert str(r) == 'torchvision[x]<0.23,>=0.22', r\n"
        "assert pyreq.canonicalize_name('Foo.Bar__baz') == 'foo-bar-baz'\n"
        "print(sorted(m for m in sys.modules if m.startswith('packaging')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    loaded = set(eval(out))  # a printed list of module names
    assert "packaging.specifiers" in loaded
    assert not loaded & {"packaging.requirements", "packaging.tags", "packaging.utils", "packaging.markers"}


def test_a_marker_goes_to_packaging_and_a_bare_url_does_not() -> None:
    req = pyreq.parse("numpy>=1; python_version >= '3.10'")
    assert isinstance(req, Requirement) and req.marker is not None
    url = pyreq.parse("x @ https://example.org/x-1.0-py3-none-any.whl")
    assert isinstance(url, pyreq.PlainRequirement)
    assert url.url == "https://example.org/x-1.0-py3-none-any.whl"


@pytest.mark.parametrize("name", ["Foo.Bar_baz", "foo--bar", "FLASH_ATTN", "a.-_b", "torch", "Torch-Scatter"])
def test_canonicalize_name_is_pep503(name: str) -> None:
    assert pyreq.canonicalize_name(name) == packaging_canonicalize(name)


def test_wheel_filename_is_packagings() -> None:
    name, version, _, tags = pyreq.parse_wheel_filename(
        "flash_attn-2.8.3+cu12torch2.7cxx11abiTRUE-cp312-cp312-linux_x86_64.whl"
    )
    assert (name, str(version)) == ("flash-attn", "2.8.3+cu12torch2.7cxx11abitrue")
    assert {str(t) for t in tags} == {"cp312-cp312-linux_x86_64"}
    with pytest.raises(ValueError):
        pyreq.parse_wheel_filename("not-a-wheel.zip")
