"""Issue 37: the profile keys ``[python] allow_old`` and ``[order] hours``; every profile problem names
its file and key, and all of a profile's problems come out at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuild.errors import EXIT_USAGE, ProfileError
from envbuild.profile import load_profile
from tests.cli_support import invoke


def _write(folder: Path, text: str, name: str = "p.toml") -> Path:
    path = folder / name
    path.write_text('name = "p"\nkind = "custom"\n' + text, encoding="utf-8")
    return path


def _problems(path: Path) -> list[str]:
    with pytest.raises(ProfileError) as caught:
        load_profile(str(path))
    return [str(issue) for issue in caught.value.issues]


# --- [python] allow_old ----------------------------------------------------------------------------


def test_allow_old_names_are_normalised_and_appended_over_extends(tmp_path: Path) -> None:
    _write(tmp_path, '[python]\nallow_old = ["Flash_Attn"]\n', "base.toml")
    child = _write(tmp_path, 'extends = "base.toml"\n[python]\nallow_old = ["vLLM", "flash-attn"]\n')
    profile = load_profile(str(child))
    assert profile.python.allow_old == ("flash-attn", "vllm")  # parent first, one spelling each
    assert load_profile("custom").python.allow_old == ()


@pytest.mark.parametrize(
    ("value", "key", "words"),
    [
        ('["vllm<0.3"]', "python.allow_old[0]", "is not a distribution name"),
        ('["vllm", "VLLM"]', "python.allow_old[1]", "listed twice"),
        ('"vllm"', "python.allow_old", "must be a list of strings"),
    ],
)
def test_bad_allow_old_is_a_profile_error_naming_file_and_key(
    tmp_path: Path, value: str, key: str, words: str
) -> None:
    path = _write(tmp_path, f"[python]\nallow_old = {value}\n")
    (problem,) = _problems(path)
    assert problem.startswith(f"{path}: {key}: ") and words in problem


# --- [order] hours ---------------------------------------------------------------------------------


def test_order_hours_is_read_as_a_number(tmp_path: Path) -> None:
    assert load_profile(str(_write(tmp_path, "[order]\nhours = 48\n"))).order.hours == 48.0
    assert load_profile("pytorch").order.hours is None


@pytest.mark.parametrize(
    ("value", "words"),
    [("0", "must be > 0"), ("-3.5", "must be > 0"), ('"48"', "must be a number, got str"), ("nan", "> 0")],
)
def test_bad_order_hours_is_a_profile_error_naming_file_and_key(
    tmp_path: Path, value: str, words: str
) -> None:
    path = _write(tmp_path, f"[order]\nhours = {value}\n")
    (problem,) = _problems(path)
    assert problem.startswith(f"{path}: order.hours: ") and words in problem


def test_unknown_order_key_lists_the_valid_ones(tmp_path: Path) -> None:
    path = _write(tmp_path, "[order]\nhour = 48\n")
    (problem,) = _problems(path)
    assert problem == f"{path}: order.hour: unknown key (did you mean 'hours'?); valid keys: hours"


def test_bad_order_hours_on_the_command_line_exits_with_the_profile_code(tmp_path: Path) -> None:
    path = _write(tmp_path, "[order]\nhours = 0\n")
    result = invoke(["check", str(path)])
    assert result.exit_code == EXIT_USAGE and result.exception is None
    assert f"{path}: order.hours: must be > 0" in result.stderr
    assert "Traceback" not in result.output
