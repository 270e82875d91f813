"""Issue 36, finding 9: the fleet token needs 128 bits from a generator, and stays out of the
environment of probes, rank processes and ``[[checks]]`` commands (envbuild/validate/fleet_token.py)."""

from __future__ import annotations

import os
import secrets
import subprocess
from pathlib import Path

import cli_support
import pytest
from cli_support import environ
from validate_support import cpu_lock

from envbuild.boundary import to_json
from envbuild.errors import UsageError
from envbuild.models import CheckSpec
from envbuild.validate.fleet_token import MAKE_ONE, TOKEN_ENV, token_problem
from envbuild.validate.rendezvous import parse_fleet


def envbuild(*args: str | Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in environ().items() if k != TOKEN_ENV}
    return cli_support.envbuild(*args, env={**clean, **env}, timeout=300)


@pytest.mark.parametrize(
    ("token", "why"),
    [
        ("a" * 16, "16 hex digits; at least 32"),  # accepted before
        ("deadbeef" * 3, "24 hex digits; at least 32"),
        ("short-but-not-hex", "17 characters; 22 or more"),
        ("a" * 40, "only 1 different characters"),
        ("xyxyxyxyxyxyxyxyxyxyxyxy", "only 2 different characters"),
        ("0123456789abcdef" * 2, "a piece of 16 characters repeated"),
        ("correct horse battery staple", "spaces or control characters"),
        ("", "no token given"),
    ],
)
def test_a_weak_token_is_refused_saying_what_the_check_is(token: str, why: str) -> None:
    problem = token_problem(token)
    assert problem is not None and why in problem
    with pytest.raises(UsageError) as caught:
        parse_fleet("10.0.0.1:29500", 2, 1, token)
    message = str(caught.value)
    assert "at least 128 bits" in message and "32+ hex digits or 22+ characters of base64url" in message
    assert MAKE_ONE in message and (not token or token not in message)


def test_generated_tokens_are_accepted() -> None:
    for _ in range(2000):
        for token in (secrets.token_hex(16), secrets.token_urlsafe(16), secrets.token_urlsafe(24)):
            assert token_problem(token) is None, token


def test_the_token_leaves_the_environment_where_it_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    token = secrets.token_urlsafe(24)
    monkeypatch.setenv(TOKEN_ENV, token)
    spec = parse_fleet("10.0.0.1:29500", 2, 1, None)
    assert spec.token == token and TOKEN_ENV not in os.environ  # no child process inherits it
    monkeypatch.setenv(TOKEN_ENV, "x" * 30)  # --fleet-token wins, and the variable still leaves
    assert parse_fleet("10.0.0.1:29500", 2, 1, token).token == token and TOKEN_ENV not in os.environ


def test_the_cli_refuses_a_weak_token_with_exit_2(tmp_path: Path) -> None:
    lock = tmp_path / "lock.json"
    lock.write_text(to_json(cpu_lock(tmp_path)), encoding="utf-8")
    weak = "a" * 16
    proc = envbuild(
        "validate", "--lock", lock, "--out", tmp_path / "runs", "--stages", "interpreter",
        "--fleet", "127.0.0.1:29500", "--nodes", "2", "--node-rank", "1",
        env={TOKEN_ENV: weak},
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "16 hex digits" in proc.stderr and MAKE_ONE in proc.stderr
    assert "Traceback" not in proc.stderr and weak not in proc.stdout + proc.stderr
    assert not (tmp_path / "runs").exists()


def test_a_checks_command_does_not_see_the_token(tmp_path: Path) -> None:
    """Before: the token was in the environment of every probe, rank process and ``[[checks]]``
    command (exit 4 here)."""
    token = secrets.token_urlsafe(24)
    probe = f"import os, sys; sys.exit(4 if {TOKEN_ENV!r} in os.environ else 0)"
    lock = tmp_path / "lock.json"
    checks = (CheckSpec(name="no-token", run=("python", "-c", probe)),)
    lock.write_text(to_json(cpu_lock(tmp_path, checks=checks)), encoding="utf-8")
    proc = envbuild(
        "validate", "--lock", lock, "--out", tmp_path / "runs", "--stages", "interpreter,os,checks",
        "--workdir", tmp_path, "--fleet", "127.0.0.1:29500", "--nodes", "2", "--node-rank", "1",
        env={TOKEN_ENV: token},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    assert token not in "".join(p.read_text(errors="replace") for p in run_dir.rglob("*") if p.is_file())


def test_without_fleet_a_token_in_the_environment_reaches_no_checks_command(tmp_path: Path) -> None:
    """A renter who exported $ENVBUILD_FLEET_TOKEN once and then validates one lot alone: the token
    still leaves envbuild's environment (the check exits 4 when it sees it)."""
    probe = f"import os, sys; sys.exit(4 if {TOKEN_ENV!r} in os.environ else 0)"
    lock = tmp_path / "lock.json"
    checks = (CheckSpec(name="no-token", run=("python", "-c", probe)),)
    lock.write_text(to_json(cpu_lock(tmp_path, checks=checks)), encoding="utf-8")
    proc = envbuild(
        "validate", "--lock", lock, "--out", tmp_path / "runs", "--stages", "interpreter,os,checks",
        "--workdir", tmp_path, env={TOKEN_ENV: secrets.token_urlsafe(24)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
