"""envbuild.cli.args: the decorators declare what argparse parses, errors exit 2 with the command's
usage, and only the command being run is imported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_support import invoke

from envbuild.cli.args import Group, argument, int_range, option, path_type

REPO = Path(__file__).resolve().parent.parent


def _group() -> tuple[Group, list[dict[str, Any]]]:
    calls: list[dict[str, Any]] = []
    root = Group("tool", "A test tool.")

    @root.command("go")
    @argument("where", type=path_type(file_okay=False))
    @option("--target", "targets", multiple=True, metavar="ID", help="Repeatable.")
    @option("--tools/--no-tools", default=True, show_default=True, help="Tools.")
    @option("--limit", type=int_range(0), default=5)
    @option("--json", "as_json", is_flag=True)
    @option("--name", "-n", required=True)
    def go(**kwargs: Any) -> None:
        """Go somewhere.

        Second paragraph."""
        calls.append(kwargs)

    sub = root.group("more")(lambda: None)
    sub.command("deep")(lambda: calls.append({"deep": True}))
    return root, calls


def test_options_reach_the_function_by_name(tmp_path: Path) -> None:
    root, calls = _group()
    root.run(["go", str(tmp_path), "--target", "a", "--target=b", "--no-tools", "--json", "-n", "x"])
    assert calls == [
        {"where": tmp_path, "targets": ("a", "b"), "tools": False, "limit": 5, "as_json": True, "name": "x"}
    ]
    root.run(["go", str(tmp_path), "--name", "y"])
    assert calls[1]["targets"] == () and calls[1]["tools"] is True and calls[1]["as_json"] is False
    root.run(["more", "deep"])
    assert calls[2] == {"deep": True}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["go", "."], "the following arguments are required: --name"),
        (["go", ".", "-n", "x", "--limit", "-1"], "argument --limit: -1 is below 0"),
        (["go", ".", "-n", "x", "--tar", "a"], "unrecognized arguments: --tar a"),  # no abbreviations
        (["goo"], "no such command 'goo' (did you mean 'go'?)"),
        (["more", "shallow"], "no such command 'shallow'"),
    ],
)
def test_usage_errors_exit_2_naming_the_problem(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    root, calls = _group()
    with pytest.raises(SystemExit) as exc:
        root.run(args)
    assert exc.value.code == 2 and not calls
    assert message in capsys.readouterr().err


def test_a_file_where_a_folder_is_wanted_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, _ = _group()
    (tmp_path / "f").write_text("", encoding="utf-8")
    with pytest.raises(SystemExit):
        root.run(["go", str(tmp_path / "f"), "-n", "x"])
    assert "is a file, not a folder" in capsys.readouterr().err


def test_help_lists_commands_and_shows_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    root, _ = _group()
    with pytest.raises(SystemExit) as exc:
        root.run(["--help"])
    assert exc.value.code == 0
    assert "go    Go somewhere." in capsys.readouterr().out
    with pytest.raises(SystemExit):
        root.run(["go", "-h"])
    text = capsys.readouterr().out
    assert "usage: tool go" in text and "Second paragraph." in text and "(default: true)" in text


def test_envbuild_version_and_unknown_command() -> None:
    assert invoke(["--version"]).stdout.startswith("envbuild, version ")
    result = invoke(["chek", "pytorch"])
    assert result.exit_code == 2 and "did you mean 'check'?" in result.stderr


def test_a_cold_check_imports_only_its_command_module() -> None:
    code = (
        "import sys\n"
        "from envbuild.cli import run\n"
        "try:\n"
        "    run(['check', 'ubuntu', '--json'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('envbuild.cli.')))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    loaded = proc.stdout.strip().splitlines()[-1]
    assert "envbuild.cli._check" in loaded and "envbuild.cli._build" not in loaded
    assert "envbuild.cli._validate" not in loaded
