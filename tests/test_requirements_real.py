"""Real-world requirement files (tests/data/requirements/real/, see SOURCE.md there) read by envbuild
and by pip's own parser: every requirement and option pip sees, envbuild sees with the same meaning,
and every line envbuild refuses is one it refuses on purpose, with its reason."""

from __future__ import annotations

import random
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from envbuild.errors import Issue, ProfileError
from envbuild.models import RequirementLine
from envbuild.profile import load_profile
from envbuild.profile import requirements as reqmod
from envbuild.profile.paths import root_place

REAL = Path(__file__).parent / "data" / "requirements" / "real"
FILES = sorted(p.name for p in REAL.glob("*.txt"))

# file -> {line number: words the refusal must contain}; every other line must go through
REFUSED: dict[str, dict[int, str]] = {
    "detectron2-docs.txt": {7: "cannot tell the project name"},
    "pytorch-index-git.txt": {8: "cannot tell the project name"},
    "detectron2-wheels.txt": {6: "cannot tell the project name"},
    "conda-freeze.txt": {1: "local path", 3: "editable", 4: "editable", 5: "local path"},
}

UNNAMED = "<named by pip only after a build>"

# One comparable record per requirement: (file, line, name, extras, specifier, url, marker, hashes)
Record = tuple[str, int, str, tuple[str, ...], str, str | None, str, tuple[str, ...]]


def _url(url: str | None) -> str | None:
    """A URL without pip's ``#egg=`` (envbuild moves it into the name)."""
    if url is None:
        return None
    base, _, fragment = url.partition("#")
    kept = "&".join(p for p in fragment.split("&") if p and not p.startswith("egg="))
    return base + (f"#{kept}" if kept else "")


def _pip_lines(path: Path) -> list[Any]:
    from pip._internal.network.session import PipSession
    from pip._internal.req.req_file import RequirementsFileParser, get_line_parser

    parser = RequirementsFileParser(PipSession(), get_line_parser(None))
    return list(parser.parse(str(path), constraint=False))


def _pip_view(path: Path, refused: dict[int, str]) -> tuple[list[Record], list[tuple[str, str]]]:
    """pip's reading, lines envbuild refuses left out: requirement records and (option, value)s."""
    from pip._internal.req.constructors import install_req_from_parsed_requirement
    from pip._internal.req.req_file import handle_requirement_line

    records: list[Record] = []
    options: list[tuple[str, str]] = []
    for line in _pip_lines(path):
        file = Path(line.filename).name
        if file == path.name and line.lineno in refused:
            continue
        opts = line.opts
        if line.requirement is not None:
            req = install_req_from_parsed_requirement(handle_requirement_line(line))
            url = _url(req.link.url) if req.link is not None else None
            hashes = tuple(sorted({f"sha256:{h}" for h in (opts.hashes or {}).get("sha256", [])}))
            marker = str(req.markers or "")
            if req.req is None:  # a bare sdist/archive URL: pip names it only after building it
                records.append((file, line.lineno, UNNAMED, (), "", url, marker, hashes))
                continue
            spec = "" if url else str(req.req.specifier)
            extras = tuple(sorted(req.req.extras))
            name = canonicalize_name(req.req.name)
            records.append((file, line.lineno, name, extras, spec, url, marker, hashes))
            continue
        if opts.index_url:
            options.append(("--index-url", opts.index_url))
        options += [("--extra-index-url", v) for v in opts.extra_index_urls or []]
        options += [("--find-links", v) for v in opts.find_links or []]
        options += [("--trusted-host", v) for v in opts.trusted_hosts or []]
        options += [
            (flag, "") for flag, on in (("--pre", opts.pre), ("--prefer-binary", opts.prefer_binary)) if on
        ]
        if opts.format_control is not None:
            options += [("--only-binary", v) for v in sorted(opts.format_control.only_binary)]
            options += [("--no-binary", v) for v in sorted(opts.format_control.no_binary)]
    return records, options


def _our_view(lines: tuple[RequirementLine, ...]) -> tuple[list[Record], list[tuple[str, str]]]:
    records: list[Record] = []
    options: list[tuple[str, str]] = []
    for line in lines:
        if line.kind == "requirement":
            req = Requirement(line.text)
            label, _, number = line.origin.rpartition(":")
            assert line.name == canonicalize_name(req.name)
            spec = "" if req.url else str(req.specifier)
            record = (
                Path(label).name,
                int(number),
                line.name,
                tuple(sorted(req.extras)),
                spec,
                _url(req.url),
                str(req.marker or ""),
                tuple(sorted(line.hashes)),
            )
            records.append(record)
        elif line.kind == "option":
            words = shlex.split(line.text)
            name, value = words[0], " ".join(words[1:])
            if name in ("--only-binary", "--no-binary"):
                options += [(name, v) for v in sorted(value.split(","))]
            elif name != "-c":
                options.append((name, value))
    return records, options


def _same(ours: list[Record], theirs: list[Record]) -> bool:
    """Equal, except that envbuild names a bare archive URL from its file name where pip cannot yet."""
    if len(ours) != len(theirs):
        return False
    for mine, pips in zip(ours, theirs, strict=True):
        if pips[2] == UNNAMED:
            mine = (*mine[:2], UNNAMED, (), "", *mine[5:])
        if mine != pips:
            return False
    return True


def _parse(path: Path) -> tuple[tuple[RequirementLine, ...], list[Issue]]:
    issues: list[Issue] = []
    place = root_place(path, path.name)
    lines = reqmod.parse_file(place, key="python.requirements[0]", issues=issues, on_file=lambda p, d: None)
    return lines, issues


def test_there_are_enough_real_world_files() -> None:
    assert len(FILES) >= 15
    listed = (REAL / "SOURCE.md").read_text(encoding="utf-8")
    assert all(f"`{name}`" in listed for name in FILES), "every fixture is named in SOURCE.md"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # pip vendors pkg_resources
@pytest.mark.parametrize("name", FILES)
def test_real_file_reads_like_pip_reads_it(tmp_path: Path, name: str) -> None:
    shutil.copytree(REAL, tmp_path / "real")
    path = tmp_path / "real" / name
    lines, issues = _parse(path)
    refused = REFUSED.get(name, {})
    got = {int(issue.key.rpartition(" line ")[2]): issue.message for issue in issues}
    assert sorted(got) == sorted(refused), issues
    for number, words in refused.items():
        assert words in got[number]
        assert all(issue.file == name for issue in issues)
    ours, our_options = _our_view(lines)
    theirs, their_options = _pip_view(path, refused)
    assert _same(ours, theirs), (ours, theirs)
    assert our_options == their_options
    assert ours, "a real file yields requirements"


@pytest.mark.parametrize("name", [n for n in FILES if n not in REFUSED])
def test_real_file_loads_through_a_profile(tmp_path: Path, name: str) -> None:
    shutil.copytree(REAL, tmp_path / "real")
    (tmp_path / "p.toml").write_text(
        f'name = "p"\nkind = "custom"\n[python]\nrequirements = ["real/{name}"]\n', encoding="utf-8"
    )
    profile = load_profile(str(tmp_path / "p.toml"))
    assert any(line.kind == "requirement" for line in profile.python.lines)
    assert all(line.origin.startswith("real/") for line in profile.python.lines)


def test_refused_lines_are_all_reported_at_once(tmp_path: Path) -> None:
    shutil.copytree(REAL, tmp_path / "real")
    (tmp_path / "p.toml").write_text(
        'name = "p"\nkind = "custom"\n[python]\nrequirements = ["real/conda-freeze.txt"]\n', encoding="utf-8"
    )
    with pytest.raises(ProfileError) as info:
        load_profile(str(tmp_path / "p.toml"))
    keys = [issue.key for issue in info.value.issues]
    assert keys == [f"python.requirements[0] line {n}" for n in (1, 3, 4, 5)]
    assert all(issue.file.endswith("real/conda-freeze.txt") for issue in info.value.issues)


def test_utf16_and_bom_files_decode_like_pip(tmp_path: Path) -> None:
    lines, issues = _parse(REAL / "powershell-freeze-utf16.txt")
    assert not issues
    assert [line.text for line in lines][:2] == ["certifi==2024.8.30", "charset-normalizer==3.3.2"]
    lines, issues = _parse(REAL / "windows-bom-crlf.txt")
    assert not issues
    assert lines[0].text == "numpy==1.26.4"


def test_percent_encoded_wheel_filename_gives_the_project(tmp_path: Path) -> None:
    lines, _ = _parse(REAL / "detectron2-docs.txt")
    names = [line.name for line in lines if line.kind == "requirement"]
    assert "torch" in names and "torchvision" in names


def _random_file(rng: random.Random) -> str:
    """A requirements file built from the pieces real files use, in random combinations."""
    hexes = [f"{i:064x}" for i in range(1, 9)]
    names = ["numpy", "Foo.Bar_baz", "a", "torch", "x-y", "Pillow"]
    extras = ["", "[a]", "[a, b]", "[ all ]"]
    specs = [
        "",
        "==1.0",
        ">=1.0,<2",
        " ~= 1.4.2",
        "===1.0-x",
        "!=1.5.*",
        "==1.0+cu121",
        " == 2.0.dev1",
        "<=3",
    ]
    markers = [
        "",
        "; python_version < '3.11'",
        ' ; sys_platform != "darwin"',
        ";platform_machine=='x86_64' and python_version>='3.8'",
        '; platform_release == "5.15/x"',
    ]
    urls = [
        " @ https://h.example/p/x-1.0-py3-none-any.whl",
        " @ git+https://github.com/o/r.git@v1#subdirectory=s",
        " @ https://h.example/x-1.0.tar.gz#sha256=" + hexes[0],
    ]
    bare = [
        "https://h.example/x-1.0.tar.gz",
        "https://h.example/t/x-1.0%2Bcpu-py3-none-any.whl",
        "git+https://h.example/r.git#egg=x",
        "https://h.example/archive/main.zip#egg=x&subdirectory=sub",
    ]
    comments = ["", "  # c", "\t# c # d", " #c --hash=sha256:zz"]
    options = [
        "--pre",
        "-i https://pypi.example/simple",
        "--extra-index-url=https://x.example/simple",
        "-f https://h.example/links.html",
        "--find-links https://h.example/torch-2.1.0+cu121.html",
        "--trusted-host h.example:8080",
        "--only-binary :all:",
        "--no-binary=x,y",
        "--prefer-binary",
    ]
    lines: list[str] = []
    for _ in range(rng.randint(1, 8)):
        roll = rng.random()
        if roll < 0.15:
            lines.append(rng.choice(options) + rng.choice(comments))
        elif roll < 0.25:
            lines.append(rng.choice(["", "# comment", "   ", "# ends in \\"]))
        else:
            if roll < 0.35:
                req = rng.choice(bare) + (
                    " " + rng.choice(markers[1:3]).lstrip(" ") if rng.random() < 0.3 else ""
                )
            else:
                name = rng.choice(names) + rng.choice(extras)
                tail = rng.choice(urls) if rng.random() < 0.2 else rng.choice(specs)
                marker = rng.choice(markers)
                req = name + tail + ((" " + marker) if tail.startswith(" @") and marker else marker)
            for _ in range(rng.randint(0, 2)):
                joiner = rng.choice([" ", " \\\n    "])
                req += f"{joiner}--hash=sha256:{rng.choice(hexes)}"
            lines.append(" " * rng.randint(0, 2) + req + rng.choice(comments))
    eol = rng.choice(["\n", "\r\n"])
    return eol.join(lines) + rng.choice([eol, ""])


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_random_files_agree_with_pip_or_are_refused_with_a_reason(tmp_path: Path) -> None:
    rng = random.Random(20261129)
    path = tmp_path / "requirements.txt"
    accepted = 0
    for _ in range(400):
        body = _random_file(rng)
        path.write_bytes(body.encode())
        lines, issues = _parse(path)
        refused = {int(issue.key.rpartition(" line ")[2]): issue.message for issue in issues}
        assert all(message for message in refused.values())
        ours, our_options = _our_view(lines)
        theirs, their_options = _pip_view(path, refused)
        assert _same(ours, theirs), (body, ours, theirs)
        assert our_options == their_options, body
        accepted += not issues
    assert accepted > 300  # the grammar is pip's: nearly every file goes through whole


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_mutated_files_never_crash_and_agree_with_pip_when_both_accept(tmp_path: Path) -> None:
    rng = random.Random(1129)
    noise = [
        "\x00",
        "\u202e",
        '"',
        "'",
        "\\",
        "#",
        ";",
        "@",
        "[",
        "$",
        "${X}",
        "{",
        "%",
        "\r",
        "\t",
        " ",
        "-",
        "=",
        "é",
    ]
    path = tmp_path / "requirements.txt"
    both = 0
    for _ in range(400):
        body = list(_random_file(rng))
        for _ in range(rng.randint(1, 3)):
            body.insert(rng.randint(0, len(body)), rng.choice(noise))
        text = "".join(body)
        path.write_bytes(text.encode())
        lines, issues = _parse(path)  # raises nothing: every problem is an Issue
        assert all(issue.key.startswith("python.requirements[0]") and issue.message for issue in issues)
        if issues:
            continue
        try:
            theirs, their_options = _pip_view(path, {})
        except Exception:  # pip refuses what envbuild accepted: allowed only for stricter pip checks
            continue
        ours, our_options = _our_view(lines)
        assert _same(ours, theirs), text
        assert our_options == their_options, text
        both += 1
    assert both > 30  # the rest: refused with a reason (bad --hash, ${VAR}, control characters...)
