"""The command line's conventions (README, "Output and exit codes"): help on every option, -V, one
finding line, --json objects that match docs/output.schema.json (also on failure), plain text off a
terminal, exit codes 0/1/2/3."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import click
import jsonschema
import pytest
from cli_support import ENVBUILD, invoke

from envbuild.cli import cli

REPO = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((REPO / "docs" / "output.schema.json").read_text(encoding="utf-8"))


def conforms(text: str) -> dict[str, object]:
    data = json.loads(text)
    jsonschema.validate(data, SCHEMA)
    return data


def commands(group: click.Group, prefix: str = "envbuild") -> list[tuple[str, click.Command]]:
    """Every command under ``group``, as `envbuild --help` finds them (importing lazily loaded ones)."""
    ctx = click.Context(group)
    out = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, f"{prefix} {name} is listed but cannot be loaded"
        out.append((f"{prefix} {name}", command))
        if isinstance(command, click.Group):
            out += commands(command, f"{prefix} {name}")
    return out


def test_every_command_and_option_has_help() -> None:
    missing = []
    for path, command in [("envbuild", cli), *commands(cli)]:
        if not (command.help or "").strip():
            missing.append(path)
        for param in command.params:
            if isinstance(param, click.Option) and not (param.help or "").strip():
                missing.append(f"{path} {param.opts[0]}")
    assert not missing, missing
    fetch = invoke(["fetch", "-h"]).stdout
    assert "--tools / --no-tools" in fetch and "(default: true)" not in fetch


def test_every_reporting_command_has_json() -> None:
    for path, command in commands(cli):
        if isinstance(command, click.Group) or path.endswith((" schema", " image record")):
            continue
        assert "as_json" in {p.name for p in command.params}, path


def test_each_command_is_loaded_from_the_module_that_defines_it() -> None:
    """The lazy map (envbuild.cli.app.COMMAND_MODULES) names, for each command, the module whose import
    registers it: after importing every command module, the registered commands are exactly the map's."""
    import importlib
    import pkgutil

    import envbuild.cli
    from envbuild.cli.app import COMMAND_MODULES

    for module in pkgutil.iter_modules(envbuild.cli.__path__, "envbuild.cli."):
        importlib.import_module(module.name)
    assert set(cli.commands) == set(COMMAND_MODULES)
    for name, module in COMMAND_MODULES.items():
        assert cli.commands[name].callback.__module__ == module, name


def test_version_and_unknown_command() -> None:
    for flag in ("-V", "--version"):
        result = invoke([flag])
        assert result.exit_code == 0 and result.stdout.startswith("envbuild, version "), result.output
    result = invoke(["chek", "pytorch"])
    assert result.exit_code == 2 and "No such command 'chek'" in result.stderr and "'check'" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["build", "x"], "Missing option '--tag'"),
        (["image", "diff", "a", "b", "--limit", "-1"], "-1 is not in the range x>=0"),
        (["check", "pytorch", "--tar", "h100"], "No such option '--tar'"),  # no abbreviations
        (["report", "shallow"], "No such command 'shallow'"),
    ],
)
def test_usage_errors_exit_2_naming_the_problem(args: list[str], message: str) -> None:
    result = invoke(args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr and result.stdout == ""


def test_a_file_where_a_folder_is_wanted_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("", encoding="utf-8")
    result = invoke(["lock", str(tmp_path / "f")])
    assert result.exit_code == 2 and "is a file" in result.stderr


def test_check_json_conforms_and_findings_are_one_line() -> None:
    result = invoke(["check", "pytorch", "--target", "mi300x", "--json"])
    assert result.exit_code == 1
    data = conforms(result.stdout)
    assert data["command"] == "check" and data["ok"] is False
    text = invoke(["check", "pytorch", "--target", "mi300x"]).stdout
    assert "error: E-VENDOR-MISMATCH: accelerator.backend" in text
    render = invoke(["render", "pytorch", "--target", "mi300x", "--out", "/nonexistent/never"])
    assert "error: E-VENDOR-MISMATCH: accelerator.backend" in render.stdout


def test_an_invalid_profile_prints_json_with_file_and_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\nkind = "pytorch"\n[accelerator]\nbackend = "opencl"\n', encoding="utf-8")
    for args in (["check"], ["render", "--out", str(tmp_path / "b")]):
        command = args[0]
        result = invoke([*args, str(bad), "--json"])
        assert result.exit_code == 2, result.output
        data = conforms(result.stdout)
        assert data["ok"] is False and data["command"] == command
        assert {(f["file"], f["key"]) for f in data["findings"]} == {(str(bad), "accelerator.backend")}
        assert "accelerator.backend" in result.stderr


def test_render_json_driver_and_verbose(tmp_path: Path) -> None:
    out = tmp_path / "b"
    result = invoke(
        ["render", "pytorch", "--target", "h100", "--driver", "580.95.05", "--out", str(out), "--json"]
    )
    assert result.exit_code == 0, result.output
    data = conforms(result.stdout)
    assert data["ok"] is True and Path(str(data["bundle"])).resolve() == out.resolve()
    assert "I-DRIVER-UNKNOWN" not in {f["code"] for f in data["findings"]}  # the driver was checked
    inputs = json.loads((out / "envbuild.inputs.json").read_text(encoding="utf-8"))
    assert inputs["driver"] == "580.95.05" and "--driver 580.95.05" in inputs["command"]
    verbose = invoke(["render", "pytorch", "--target", "h100", "--out", str(tmp_path / "c"), "-v"])
    assert "  source: " in verbose.stdout


def test_requirements_file_as_profile_points_to_python_requirements(tmp_path: Path) -> None:
    reqs = tmp_path / "requirements.txt"
    reqs.write_text("numpy==2.1.3\ntorch>=2.7\n", encoding="utf-8")
    result = invoke(["check", str(reqs)])
    assert result.exit_code == 2
    assert "not valid TOML" in result.stderr and "[python] requirements" in result.stderr


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_index_exits_3_with_json() -> None:
    index = f"http://127.0.0.1:{_closed_port()}/simple"
    result = invoke(["check", "pytorch-cpu", "--resolve", "--index-url", index, "--json"])
    assert result.exit_code == 3, result.output
    data = conforms(result.stdout)
    assert data["ok"] is False and data["findings"][0]["code"] == "E-RESOLVE"


def test_report_verify_json_on_a_missing_report(tmp_path: Path) -> None:
    result = invoke(["report", "verify", str(tmp_path / "none"), "--json"])
    assert result.exit_code == 1
    data = conforms(result.stdout)
    assert data["ok"] is False and data["findings"]


def test_validate_json_envelope_conforms(tmp_path: Path) -> None:
    from envbuild.cli._validate import report_json

    stages = [
        {"stage": "interpreter", "status": "passed", "error": None, "hint": None},
        {"stage": "packages", "status": "failed", "error": "numpy 2.0 != 2.1", "hint": "rebuild"},
    ]
    (tmp_path / "report.json").write_text(json.dumps({"ok": False, "stages": stages}), encoding="utf-8")
    data = report_json(tmp_path)
    jsonschema.validate(data, SCHEMA)
    assert [f["code"] for f in data["findings"]] == ["E-STAGE-FAILED"]
    assert data["report"]["stages"] == stages


def test_plain_text_off_a_terminal_and_under_no_color() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    argv = [*ENVBUILD, "check", "pytorch", "--target", "mi300x"]
    plain = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert "\x1b[" not in plain.stdout and "error: E-VENDOR-MISMATCH" in plain.stdout
    forced = subprocess.run(
        argv, capture_output=True, text=True, cwd=REPO, env={**env, "FORCE_COLOR": "1"}, timeout=120
    )
    assert "\x1b[" in forced.stdout
    no_color = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**env, "FORCE_COLOR": "1", "NO_COLOR": "1"},
        timeout=120,
    )
    assert "\x1b[" not in no_color.stdout


def test_the_readme_documents_every_command_and_exit_code() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    commands_section = readme.split("## Commands\n", 1)[1].split("\n## ", 1)[0]
    for path, _ in commands(cli):
        assert f"`{path.removeprefix('envbuild ').split(' ')[0]}" in commands_section, path
    codes = readme.split("## Output and exit codes\n", 1)[1].split("\n## ", 1)[0]
    for code in range(4):
        assert f"\n| {code} | " in codes
