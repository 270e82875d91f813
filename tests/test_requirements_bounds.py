"""Requirement includes are bounded and constraints files hold no secret (issue 25, findings 7 and 8).

Real files, the real loader; the include bomb runs ``envbuild check`` in a subprocess with a timeout, so
that a parser without the bounds fails the test instead of hanging it."""

from __future__ import annotations

import secrets
import subprocess
from pathlib import Path

import pytest
from cli_support import envbuild, invoke

from envbuild.cli import _check, _render, cli  # noqa: F401  (register the commands)
from envbuild.errors import Issue, ProfileError
from envbuild.profile import load_profile
from envbuild.profile.paths import Place, root_place
from envbuild.profile.requirements import parse_file

MAX_INCLUSIONS, MAX_INCLUDED_LINES = 256, 100_000  # the issue's bounds
PROFILE = 'name = "p"\nkind = "custom"\n[python]\nrequirements = ["r00.txt"]\n'


def _check_subprocess(folder: Path) -> subprocess.CompletedProcess[str]:
    profile = folder / "p.toml"
    profile.write_text(PROFILE)
    try:
        return envbuild("check", profile, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("envbuild check did not end within 20 s: the includes are not bounded")


def test_an_include_bomb_ends_quickly_naming_the_limit_and_the_file(tmp_path: Path) -> None:
    # the attacker's input: 16 files, each including the next four times (4**15 inclusions unbounded)
    for i in range(16):
        body = "six==1.16.0\n" if i == 15 else f"-r r{i + 1:02d}.txt\n" * 4
        (tmp_path / f"r{i:02d}.txt").write_text(body)
    done = _check_subprocess(tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"more than {MAX_INCLUSIONS} -r/-c inclusions" in done.stderr
    assert "r00.txt" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr) < 10_000  # one problem, not one per inclusion


def test_included_lines_are_bounded_in_all(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("# a line\n" * 1000)
    (tmp_path / "r00.txt").write_text("-r big.txt\n" * (MAX_INCLUDED_LINES // 1000 + 1))  # < 256 inclusions
    done = _check_subprocess(tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"more than {MAX_INCLUDED_LINES} lines" in done.stderr and "big.txt" in done.stderr


def test_each_distinct_file_is_read_and_parsed_once(tmp_path: Path) -> None:
    (tmp_path / "leaf.txt").write_text("six==1.16.0\n")
    (tmp_path / "mid.txt").write_text("-r leaf.txt\n-r leaf.txt\n")
    (tmp_path / "r00.txt").write_text("-r mid.txt\n-r leaf.txt\n-r mid.txt\n")
    read: list[str] = []
    issues: list[Issue] = []

    def on_file(place: Place, data: bytes) -> None:
        read.append(place.label)

    top = root_place(tmp_path / "r00.txt", "r00.txt")
    lines = parse_file(top, key="python.requirements[0]", issues=issues, on_file=on_file)
    assert issues == []
    assert sorted(read) == ["leaf.txt", "mid.txt", "r00.txt"]
    # every inclusion still gives its lines, in file order: 5 of leaf's, through 2 mids and 1 direct
    assert [line.text for line in lines if line.kind == "requirement"] == ["six==1.16.0"] * 5
    assert [line.text for line in lines if line.kind == "include"] == [
        "-r mid.txt",
        "-r leaf.txt",
        "-r leaf.txt",
        "-r leaf.txt",
        "-r mid.txt",
        "-r leaf.txt",
        "-r leaf.txt",
    ]


# ---------------------------------------------------------------- constraints files (finding 8)


def _project(tmp_path: Path, constraints: str) -> Path:
    (tmp_path / "r00.txt").write_text("six==1.16.0\n-c constraints.txt\n")
    (tmp_path / "constraints.txt").write_text(constraints)
    profile = tmp_path / "p.toml"
    profile.write_text(PROFILE)
    return profile


@pytest.mark.parametrize("kind", ["url", "token"])
def test_a_secret_in_a_constraints_comment_is_refused_at_load(tmp_path: Path, kind: str) -> None:
    password = secrets.token_hex(12)
    token = f"ghp_{secrets.token_hex(18)}"
    comment = (
        f"# mirror: https://ops:{password}@mirror.example/simple\n"
        if kind == "url"
        else f"# pinned for the build bot, token {token}\n"
    )
    profile = _project(tmp_path, f"urllib3<3\n{comment}idna<4  # fine\n")
    with pytest.raises(ProfileError) as info:
        load_profile(str(profile))
    [problem] = [str(issue) for issue in info.value.issues]
    assert problem.startswith(f"{tmp_path}/constraints.txt: python.requirements[0] line 2: ")
    assert ("a URL with a password" if kind == "url" else "a GitHub access token") in problem
    assert ("https://***@mirror.example" if kind == "url" else "ghp_***") in problem
    assert password not in problem and token[4:] not in problem
    rendered = invoke(["render", str(profile), "--force", "--out", str(tmp_path / "bundle")])
    assert rendered.exit_code == 2 and not (tmp_path / "bundle").exists()
    assert password not in rendered.output and token[4:] not in rendered.output


def test_a_constraints_file_is_copied_without_its_comments(tmp_path: Path) -> None:
    profile = _project(
        tmp_path,
        "# -*- coding: utf-8 -*-\n# ops: keep urllib3 below 3 (ticket 1234)\n\n"
        "urllib3<3  # see the ticket\nidna \\\n  <4\n--only-binary :all:\n",
    )
    done = invoke(["render", str(profile), "--force", "--out", str(tmp_path / "bundle")])
    assert done.exit_code == 0, done.output
    copy = (tmp_path / "bundle" / "constraints" / "01-constraints.txt").read_text()
    assert copy == "urllib3<3\nidna<4\n--only-binary :all:\n"
