"""Real-world requirement files (tests/data/requirements/real/, see SOURCE.md there) read by envbuild
and by pip's own parser: every requirement and option pip sees, envbuild sees with the same meaning,
and every line envbuild refuses is one it refuses on purpose, with its reason."""

from __future__ import annotations

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
            assert req.req is not None, f"{file}:{line.lineno} is unnamed for pip too"
            url = _url(req.link.url) if req.link is not None else None
            hashes = tuple(sorted(f"sha256:{h}" for h in (opts.hashes or {}).get("sha256", [])))
            spec = "" if url else str(req.req.specifier)
            extras = tuple(sorted(req.req.extras))
            marker = str(req.markers or "")
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
            name, _, value = line.text.partition(" ")
            if name in ("--only-binary", "--no-binary"):
                options += [(name, v) for v in sorted(value.split(","))]
            elif name != "-c":
                options.append((name, value))
    return records, options


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
    assert ours == theirs
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
