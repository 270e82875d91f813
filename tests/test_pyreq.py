"""envbuild.pyreq: its own reading of plain requirements (specifiers or ``@ URL``, and plain markers) agrees
with packaging's, and it falls back to packaging for everything else (parenthesised or ``extra``
markers, malformed text), with packaging's error."""

from __future__ import annotations

import itertools
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


# Marker environments the verdicts are compared in: the images envbuild plans (CPython 3.8-3.14 on
# x86_64 and aarch64 Linux), and written for this test, others that make the comparisons go the other
# way (Windows, macOS, PyPy, a pre-release, a kernel release string).
ENVIRONMENTS = [
    pyreq.marker_env(f"3.{minor}", machine) for minor in range(8, 15) for machine in ("x86_64", "aarch64")
]
ENVIRONMENTS += [
    {**pyreq.marker_env("3.13"), "python_full_version": "3.13.0rc1", "platform_release": "5.15.0-91-generic"},
    {**pyreq.marker_env("3.10"), "sys_platform": "win32", "os_name": "nt", "platform_system": "Windows"},
    {
        **pyreq.marker_env("3.12"),
        "sys_platform": "darwin",
        "platform_system": "Darwin",
        "platform_machine": "arm64",
    },
    {**pyreq.marker_env("3.11"), "implementation_name": "pypy", "platform_python_implementation": "PyPy"},
    {**pyreq.marker_env("3.9"), "implementation_version": "7.3.17", "platform_release": "6.8"},
]


def _verdicts(req: pyreq.ParsedRequirement) -> list[bool | str]:
    if req.marker is None:
        return []
    out: list[bool | str] = []
    for env in ENVIRONMENTS:
        try:
            out.append(bool(req.marker.evaluate(env)))
        except Exception as exc:  # packaging's UndefinedComparison, ...: the same failure expected
            out.append(type(exc).__name__)
    return out


def _disagreement(text: str) -> str | None:
    theirs, ours = _packaging(text), _ours(text)
    if isinstance(theirs, str) or isinstance(ours, str):
        return None if ours == theirs else f"{text!r}: packaging {theirs!r}, envbuild {ours!r}"
    mine = (ours.name, ours.extras, ours.specifier, ours.url, str(ours.marker), str(ours), _verdicts(ours))
    packagings = (
        theirs.name,
        theirs.extras,
        theirs.specifier,
        theirs.url,
        str(theirs.marker),
        str(theirs),
        _verdicts(theirs),
    )
    return None if mine == packagings else f"{text!r}: packaging {packagings!r}, envbuild {mine!r}"


@pytest.mark.parametrize("text", EDGES)
def test_edge_agrees_with_packaging(text: str) -> None:
    assert _disagreement(text) is None


def test_corpus_agrees_with_packaging() -> None:
    assert len(CORPUS) > 300
    assert [d for d in map(_disagreement, CORPUS) if d] == []
    # and the plain reader did the work: every valid line without a marker is read plain, and most with
    parsed = [(t, _packaging(t)) for t in CORPUS]
    plain = [t for t, req in parsed if not isinstance(req, str) and req.marker is None]
    assert len(plain) > 250 and any("@" in t for t in plain)
    assert [t for t in plain if not isinstance(pyreq.parse(t), pyreq.PlainRequirement)] == []
    marked = [t for t, req in parsed if not isinstance(req, str) and req.marker is not None]
    read_plain = [t for t in marked if isinstance(pyreq.parse(t), pyreq.PlainRequirement)]
    assert len(marked) > 20 and len(read_plain) > len(marked) // 2


def test_plain_markers_are_read_plain_and_the_rest_goes_to_packaging() -> None:
    req = pyreq.parse("numpy>=1; python_version >= '3.10'")
    assert isinstance(req, pyreq.PlainRequirement) and str(req.marker) == 'python_version >= "3.10"'
    assert pyreq.applies_on_image(req, "3.12") and not pyreq.applies_on_image(req, "3.9")
    url = pyreq.parse("x @ https://example.org/x-1.0-py3-none-any.whl")
    assert isinstance(url, pyreq.PlainRequirement)
    assert url.url == "https://example.org/x-1.0-py3-none-any.whl"
    for text in (
        "a; extra == 'cuda'",  # extras are normalised by rules that changed between packaging releases
        "a; (python_version < '3.12' or sys_platform == 'win32') and os_name == 'nt'",  # nesting
        "a; os.name == 'posix'",  # a legacy alias
        "a; sys_platform < 'linux'",  # string ordering: its meaning changed between packaging releases
        "a; python_version === '3.12'",
    ):
        assert isinstance(pyreq.parse(text), Requirement), text


# Markers generated for this test from PEP 508's grammar: every variable against values that do and do
# not match the environments above, with each operator, spacing and quoting, alone and joined.
_ATOMS = [
    f"{variable} {op} {value}"
    for variable, values in {
        "python_version": ["'3.12'", '"3.8"', "'3.1'", "'3'", "'3.*'", "'3.10.*'", "'abc'"],
        "python_full_version": ["'3.13.0'", "'3.13.0rc1'", "'3.9.0'"],
        "platform_release": ["'6.0'", "'5.15.0-91-generic'"],
        "implementation_version": ["'7.3'"],
        "sys_platform": ["'linux'", "'win32'", "'lin'"],
        "platform_machine": ["'x86_64'", "'aarch64'", "'x86_64 aarch64'"],
        "platform_system": ["'Linux'"],
        "os_name": ["'nt'"],
        "implementation_name": ["'cpython'"],
        "platform_python_implementation": ["'CPython'", "'PyPy'"],
        "platform_version": ["''"],
    }.items()
    for value in values
    for op in ("==", "!=", "<", "<=", ">", ">=", "~=", "in", "not in")
] + ["'linux' in sys_platform", '"86" not in platform_machine', "'3.12' == python_version", "extra == 'x'"]


def _generated_markers() -> list[str]:
    texts = list(_ATOMS)
    texts += [f"{a} and {b}" for a, b in itertools.islice(itertools.product(_ATOMS[::7], _ATOMS[3::11]), 300)]
    texts += [f"{a} or {b} and {c}" for a, b, c in zip(_ATOMS[::5], _ATOMS[2::5], _ATOMS[4::5], strict=False)]
    texts += [
        t.replace(" ", "").replace("notin", "not in") for t in _ATOMS[::3]
    ]  # no blanks where none needed
    texts += [t.replace(" ", "\t  ") for t in _ATOMS[1::4]]
    return texts


def test_generated_markers_agree_with_packaging() -> None:
    texts = _generated_markers()
    lines = [f"pkg>=1; {t}" for t in texts] + [
        f"pkg @ https://h/pkg-1.0-py3-none-any.whl ; {t}" for t in texts[::9]
    ]
    assert [d for d in map(_disagreement, lines) if d] == []
    read_plain = [line for line in lines if pyreq._plain(line) is not None]
    assert len(read_plain) > len(lines) // 2  # the plain reader took most of them, not packaging


# written for this test: malformed markers, and forms at the edge of the plain reader
MARKER_EDGES = [
    "a;",
    "a; ",
    "a ;python_version<'3'",
    "a; python_version",
    "a; python_version <",
    "a; python_version < '3.8' and",
    "a; and python_version < '3.8'",
    "a; python_version < '3.8' andx sys_platform == 'linux'",
    "a; python_version<'3.8'and sys_platform=='linux'",
    "a; python_version < '3.8' xor sys_platform == 'linux'",
    "a; python_version < 3.8",
    "a; python_version < '3.8",
    "a; python_version < \"3.8'",
    "a; python_version2 < '3.8'",
    "a; python_version < 'a\\b'",
    "a; sys_platform == 'it''s'",
    'a; sys_platform == "it\'s"',
    "a; 'linux' == sys_platform",
    "a; 'linux' 'x' sys_platform",
    "a; sys_platform == sys_platform",
    "a; 'a' == 'a'",
    "a; sys_platform not  in 'linux'",
    "a; sys_platform notin 'linux'",
    "a; sys_platform not",
    "a==1; python_version < '3.8'; sys_platform == 'linux'",
    "x @ https://h/x.whl; python_version < '3.8'",
    "x @ https://h/x.whl ;python_version < '3.8'",
    "x @ https://h/x.whl python_version < '3.8'",
    "x @ https://h/x.whl ; ",
    "a[b] (>=1) ; python_version >= '3.8'",
]


@pytest.mark.parametrize("text", MARKER_EDGES)
def test_marker_edge_agrees_with_packaging(text: str) -> None:
    assert _disagreement(text) is None


def test_a_hostile_marker_is_read_in_linear_time() -> None:
    """Step by step, never a backtracking regex: long markers finish at once (or go to packaging)."""
    long_marker = "a; " + " and ".join(["python_version >= '3.8'"] * 20000)
    req = pyreq.parse(long_marker)
    assert isinstance(req, pyreq.PlainRequirement) and pyreq.applies_on_image(req, "3.12")
    assert pyreq._plain("a; python_version" + " " * 1_000_000 + "<") is None


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
