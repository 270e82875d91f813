"""Issue 37: the profile keys ``[python] allow_old`` and ``[order] hours``; every profile problem names
its file and key, and all of a profile's problems come out at once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import invoke

from envbuild.errors import EXIT_USAGE, ProfileError
from envbuild.profile import load_profile


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


# --- every profile problem names its file and key, all at once ------------------------------------

BAD_TARGET = (
    "accelerator.targets[0]: unknown target 'h1000' (did you mean 'h100' or 'h200'?); valid targets: "
)
BAD_TORCH = "torch.version: '2.99.0' is not a release envbuild knows (series "


def test_a_typo_an_unknown_target_and_an_unknown_torch_come_out_together(tmp_path: Path) -> None:
    path = _write(
        tmp_path, '[accelerator]\ntargets = ["h1000"]\n[torch]\nversion = "2.99.0"\nverison = "2"\n'
    )
    result = invoke(["check", str(path)])
    assert result.exit_code == EXIT_USAGE and result.exception is None
    head, typo, target, torch = result.stderr.splitlines()
    assert head == "envbuild: error: invalid profile (3 problems):"
    assert (
        typo
        == f"  - {path}: torch.verison: unknown key (did you mean 'version'?); valid keys: packages, version"
    )
    assert target.startswith(f"  - {path}: {BAD_TARGET}") and "h100, h100-pcie" in target
    assert torch.startswith(f"  - {path}: {BAD_TORCH}") and "such as 2.14.1" in torch
    result = invoke(["render", str(path), "--json", "--out", str(tmp_path / "bundle")])  # every command
    findings = json.loads(result.stdout)["findings"]
    assert [(f["code"], f["key"]) for f in findings] == [
        ("E-PROFILE", "torch.verison"),
        ("E-PROFILE", "accelerator.targets[0]"),
        ("E-PROFILE", "torch.version"),
    ]


def test_check_reports_an_unknown_target_and_torch_of_a_clean_profile_together(tmp_path: Path) -> None:
    path = _write(tmp_path, '[accelerator]\ntargets = ["h1000", "b200"]\n[torch]\nversion = "2.99.0"\n')
    result = invoke(["check", str(path), "--json"])
    assert result.exit_code == EXIT_USAGE and result.exception is None
    findings = json.loads(result.stdout)["findings"]
    assert [(f["code"], f["file"], f["key"]) for f in findings] == [
        ("E-PROFILE", str(path), "accelerator.targets[0]"),
        ("E-PROFILE", str(path), "torch.version"),
    ]
    plain = invoke(["check", str(path)])
    assert plain.exit_code == EXIT_USAGE
    assert f"  - {path}: {BAD_TARGET}" in plain.stderr and f"  - {path}: {BAD_TORCH}" in plain.stderr


def test_an_inherited_unknown_torch_names_the_parent_file(tmp_path: Path) -> None:
    _write(tmp_path, '[torch]\nversion = "2.99.0"\n', "base.toml")
    child = _write(tmp_path, 'extends = "base.toml"\n[accelerator]\ntargets = ["h100"]\n')
    result = invoke(["check", str(child)])
    assert result.exit_code == EXIT_USAGE
    assert f"  - {tmp_path / 'base.toml'}: {BAD_TORCH}" in result.stderr


def test_a_target_given_on_the_command_line_stays_a_usage_error(tmp_path: Path) -> None:
    path = _write(tmp_path, '[accelerator]\ntargets = ["h1000"]\n')
    result = invoke(["check", str(path), "--target", "h999", "--json"])
    assert result.exit_code == EXIT_USAGE
    (finding,) = json.loads(result.stdout)["findings"]
    assert finding["code"] == "E-USAGE" and finding["message"].startswith("--target: unknown target 'h999'")


def test_a_profile_issue_is_one_line() -> None:
    from envbuild.errors import Issue

    issue = Issue("p.toml", "python.requirements[0]", "cannot read:\n  permission denied\r\n")
    assert str(issue) == "p.toml: python.requirements[0]: cannot read: permission denied"
