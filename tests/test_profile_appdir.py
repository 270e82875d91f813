"""`envbuild check` refuses the app folders that `envbuild render` would refuse (one shared walker)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_support import invoke

from envbuild.cli import _check, _render, cli  # noqa: F401  (register the commands)

PROFILE = 'name = "apptest"\nkind = "pytorch"\nextends = "pytorch-cpu"\n[app]\nsource = "app"\n'


def _profile(tmp_path: Path) -> Path:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "main.py").write_text("print('hello')\n")
    path = tmp_path / "p.toml"
    path.write_text(PROFILE)
    return path


def _bad_link(app: Path) -> str:
    os.symlink("/etc/passwd", app / "passwd")
    return "passwd is a link that leads outside"


def _netrc(app: Path) -> str:
    (app / ".netrc").write_text("machine example.com login x password y\n")
    return ".netrc is a credentials file"


def _ssh_key(app: Path) -> str:
    (app / "keys").mkdir()
    (app / "keys" / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    return "keys/id_ed25519 looks like an SSH private key"


@pytest.mark.parametrize("make_bad", [_bad_link, _netrc, _ssh_key], ids=["link-out", "netrc", "ssh-key"])
def test_check_and_render_refuse_the_same_app_folder(tmp_path: Path, make_bad: object) -> None:
    profile = _profile(tmp_path)
    assert invoke(["check", str(profile)]).exit_code == 0

    expected = make_bad(tmp_path / "app")  # type: ignore[operator]
    checked = invoke(["check", str(profile)])
    assert checked.exit_code == 2
    assert "app.source" in checked.output and expected in checked.output

    out = tmp_path / "bundle"
    rendered = invoke(["render", str(profile), "--force", "--out", str(out)])
    assert rendered.exit_code == 2
    assert expected in rendered.output
    assert not out.exists()
