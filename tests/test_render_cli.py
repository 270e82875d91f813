"""``envbuild render`` on the command line: exit codes, what is written, the recorded command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import Result, invoke

import envbuild.cli._render  # noqa: F401  (registers the command)
from envbuild.cli._render import regenerate_command


def run(*args: str) -> Result:
    return invoke(["render", *args])


def test_renders_a_builtin(tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    result = run("pytorch", "--target", "h100", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert f"wrote {out}" in result.stdout
    assert "I-DRIVER-UNKNOWN" in result.stdout  # findings are printed
    assert (out / "Dockerfile").is_file() and (out / "envbuild.lock.json").is_file()
    lock = json.loads((out / "envbuild.lock.json").read_text())
    assert [t["id"] for t in lock["targets"]] == ["h100"]


def test_error_findings_exit_1_and_write_nothing(tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    result = run("pytorch", "--target", "mi300x", "--out", str(out))
    assert result.exit_code == 1
    assert "error: E-VENDOR-MISMATCH: " in result.stdout and "nothing written" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_force_writes_anyway(tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    result = run("pytorch", "--target", "mi300x", "--out", str(out), "--force")
    assert result.exit_code == 0, result.output
    assert "--force" in result.stderr
    assert "despite error findings" in (out / "README.md").read_text()
    assert "--force" in (out / "requirements-rebuild.txt").read_text().splitlines()[1]


def test_unknown_target_is_usage_error(tmp_path: Path) -> None:
    result = run("pytorch", "--target", "h1000", "--out", str(tmp_path / "b"))
    assert result.exit_code == 2
    assert "h100" in result.stderr  # the valid choices are listed
    assert list(tmp_path.iterdir()) == []


def test_hostile_profile_exit_2_nothing_written(tmp_path: Path) -> None:
    profile = tmp_path / "evil.toml"
    profile.write_text(
        'name = "evil"\nkind = "ubuntu"\n[system]\napt = ["git; rm -rf /"]\n[env]\nX = "a\\nRUN b"\n'
    )
    result = run(str(profile), "--out", str(tmp_path / "b"))
    assert result.exit_code == 2
    assert "system.apt" in result.stderr and "env.X" in result.stderr
    assert "Traceback" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evil.toml"]


def test_foreign_out_folder_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("precious")
    result = run("ubuntu", "--out", str(out))
    assert result.exit_code == 2
    assert "not an envbuild bundle" in result.stderr
    assert [p.name for p in out.iterdir()] == ["thesis.tex"]


def test_out_under_a_file_is_a_usage_error_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    out = tmp_path / "notes.txt" / "bundle"
    result = run("ubuntu", "--out", str(out))
    assert result.exit_code == 2, result.output
    assert f"{out}: cannot create the bundle folder" in result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_default_out_and_recorded_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = run("pytorch-cpu")
    assert result.exit_code == 0, result.output
    header = (tmp_path / "pytorch-cpu-cpu" / "requirements-rebuild.txt").read_text().splitlines()
    assert header[1] == "#   envbuild render pytorch-cpu"


def tree(path: Path) -> dict[str, bytes]:
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_bundle_bytes_do_not_depend_on_the_out_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proj = tmp_path / "proj"
    (proj / "app").mkdir(parents=True)
    (proj / "app" / "main.py").write_text("print('main')\n")
    (proj / "constraints.txt").write_text("numpy<3\n")
    (proj / "reqs.txt").write_text("-c constraints.txt\nnumpy>=2.0\n")
    (proj / "p.toml").write_text(
        'name = "proj"\nkind = "pytorch"\nextends = "pytorch-cpu"\n'
        '[python]\nrequirements = ["reqs.txt"]\n[app]\nsource = "app"\n'
    )
    monkeypatch.chdir(tmp_path)
    first = run("proj/p.toml", "--out", "a")
    second = run("proj/p.toml", "--out", str(tmp_path / "x" / "y" / "other-name"))
    assert first.exit_code == 0 and second.exit_code == 0, first.output + second.output
    a, b = tree(tmp_path / "a"), tree(tmp_path / "x" / "y" / "other-name")
    assert "constraints/01-constraints.txt" in a and "app/main.py" in a
    assert a == b
    assert b"--out" not in a["requirements-rebuild.txt"] and b"other-name" not in b"".join(b.values())


def test_regenerate_command_is_relative_and_quoted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    command = regenerate_command(str(tmp_path / "my profile.toml"), ("h100", "b200"), False)
    assert command == "envbuild render 'my profile.toml' --target h100 --target b200"
    assert regenerate_command("/elsewhere/p.toml", (), True) == "envbuild render /elsewhere/p.toml --force"


def test_render_imports_neither_torch_nor_docker(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from envbuild.cli import main\n"
        f"sys.argv = ['envbuild', 'render', 'custom', '--target', 'h100', '--out', {str(tmp_path / 'b')!r}]\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
        "print(code, 'torch' in sys.modules, 'docker' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.stdout.strip().splitlines()[-1] == "0 False False", proc.stdout + proc.stderr
    assert (tmp_path / "b" / "Dockerfile").is_file()
