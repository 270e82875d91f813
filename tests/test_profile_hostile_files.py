"""Hostile profile files on disk: every problem is named; `envbuild check`/`render` exit 2, write nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import invoke

from envbuild.errors import ProfileError
from envbuild.profile import load_profile

HOSTILE = Path(__file__).parent / "data" / "profiles" / "hostile"
FILES = sorted(HOSTILE.glob("*.toml"))


def _expected(path: Path) -> set[str]:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("# expect: "), f"{path.name} must start with '# expect: KEY, ...'"
    return {key.strip() for key in first.removeprefix("# expect: ").split(",")}


def test_there_are_hostile_files() -> None:
    assert len(FILES) >= 5


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_every_problem_is_reported_against_its_key(path: Path) -> None:
    with pytest.raises(ProfileError) as info:
        load_profile(str(path))
    assert {issue.key for issue in info.value.issues} == _expected(path)
    # a cycle is reported by the file whose `extends` closes it; everything else by the file itself
    reporter = {"cycle-a": "cycle-b.toml", "cycle-b": "cycle-a.toml"}.get(path.stem, path.name)
    assert {issue.file for issue in info.value.issues} == {str(HOSTILE / reporter)}


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_cli_check_and_render_exit_2_and_write_nothing(path: Path, tmp_path: Path) -> None:
    from envbuild.cli import _check, _render, cli  # noqa: F401 - registers the commands

    check = invoke(["check", str(path)])
    assert check.exit_code == 2, check.output
    assert "Traceback" not in check.output
    for key in _expected(path):
        assert f": {key}: " in check.output
    out = tmp_path / "bundle"
    render = invoke(["render", str(path), "--out", str(out), "--force"])
    assert render.exit_code == 2, render.output
    assert not out.exists() and list(tmp_path.iterdir()) == []
