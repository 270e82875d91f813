"""Done-when for issue 12: planted secrets never leave the machine (no engine needed).

A held-out set of secrets, made at test time from random suffixes, is planted in every place a user
could put one: a profile's ``[env]``, an option line in ``torch.packages`` and in a requirements file,
the app folder, a rendered bundle's folders (``certs/``, ``app/``, ``wheelhouse/``, ``tools/``, the
top level), a ``--ca-cert`` file, and the environment of ``envbuild validate``.  Each test asserts
that the plant was refused or redacted where it was expected (so the test can fail) and that the
value appears in no message (stdout/stderr), bundle file or report file.  The image side (every
layer, the history) is scanned in tests/test_e2e.py on the session's shared image.
"""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path

import pytest
from build_support import make_ca
from secrets_support import assert_absent, run
from validate_support import cpu_lock

from envbuild.boundary import to_json
from envbuild.models import CheckSpec

REPO = Path(__file__).resolve().parent.parent


def _token(n: int = 36) -> str:
    return secrets.token_hex(n)[:n]


def files_text(folder: Path) -> str:
    return "\n".join(
        p.read_bytes().decode("latin-1")
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    )


def test_profile_env_and_option_lines(tmp_path: Path) -> None:
    plants = {
        "openai_key": _token(40),  # secret by name only
        "hf_hub": f"hf_{_token(34)}",  # secret by value only
        "pat": f"ghp_{_token(36)}",
        "torch_pw": f"pw{_token(14)}",  # in a torch.packages option line
        "req_pw": f"pw{_token(14)}",  # in a requirements file option line
        "url_token": f"glpat-{_token(20)}",
        "description": f"xoxb-{_token(12)}-{_token(24)}",  # would become an image label
        "check_arg": f"ghs_{_token(36)}",  # would be recorded in the lock, inside the image
    }
    (tmp_path / "requirements.txt").write_text(
        f"--extra-index-url https://deploy:{plants['req_pw']}@pkgs.example/simple\nnumpy==2.2.6\n"
    )
    profile = tmp_path / "leaky.toml"
    profile.write_text(
        f'name = "leaky"\nkind = "pytorch"\ndescription = "posts with {plants["description"]}"\n'
        '[base]\nos = "debian12"\n[accelerator]\nbackend = "cpu"\n'
        '[python]\nversion = "3.11"\nrequirements = ["requirements.txt"]\n'
        f'[torch]\nversion = "2.13.0"\npackages = ["--extra-index-url https://u:{plants["torch_pw"]}@h.example/simple"]\n'
        f'[env]\nOPENAI_KEY = "{plants["openai_key"]}"\nHF_HUB = "{plants["hf_hub"]}"\n'
        f'REPO_URL = "https://{plants["pat"]}@github.com/org/repo"\n'
        f'MIRROR = "https://{plants["url_token"]}@gitlab.example/r"\n'
        f'[[checks]]\nname = "pilot"\nrun = ["python", "pilot.py", "--token", "{plants["check_arg"]}"]\n'
    )
    out = tmp_path / "bundle"
    for args in (("check", profile), ("render", profile, "--out", out), ("check", profile, "--json")):
        proc = run(*args)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert_absent(list(plants.values()), proc.stdout, proc.stderr)
        shown = proc.stdout + proc.stderr
        # Each plant was refused where it was planted, naming the file and the key.
        keys = ("env.OPENAI_KEY", "env.HF_HUB", "env.REPO_URL", "env.MIRROR", "torch.packages[0]")
        for key in (*keys, "description", "checks[0].run[3]"):
            assert key in shown, (args, key, shown)
        assert "leaky.toml" in shown and "requirements.txt" in shown
        assert "https://***@h.example/simple" in shown  # the option line, shown redacted
    assert not out.exists()


@pytest.mark.parametrize(
    "name",
    [
        "credentials.json",
        "service-account-ci.json",
        ".envrc",
        "kubeconfig",
        ".netrc",
        "id_ed25519",
        "tls/server.pem",
        "settings.ini",
    ],
)
def test_app_folder_plants(tmp_path: Path, name: str) -> None:
    _cert, key = make_ca(tmp_path)
    value = f"sk-proj-{_token(40)}"
    body = key.read_text() if name.endswith((".pem", "id_ed25519")) else f"api_key = {value}\n"
    app = tmp_path / "app"
    (app / name).parent.mkdir(parents=True, exist_ok=True)
    (app / "main.py").write_text("print('ok')\n")
    (app / name).write_text(body)
    profile = tmp_path / "p.toml"
    profile.write_text(
        'name = "p"\nkind = "ubuntu"\n[base]\nos = "debian12"\n[accelerator]\nbackend = "cpu"\n'
        '[python]\nversion = "3.11"\n[app]\nsource = "app"\n'
    )
    out = tmp_path / "bundle"
    assert run("check", profile, cwd=tmp_path).returncode == 2
    (app / name).unlink()
    assert run("check", profile).returncode == 0  # the same profile, without the plant, is fine
    (app / name).write_text(body)
    for args in (("check", profile), ("render", profile, "--out", out)):
        proc = run(*args)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert "invalid profile (1 problem)" in proc.stderr or args[0] == "render", proc.stderr
        assert f"{name} " in proc.stderr and "secrets never go into a bundle" in proc.stderr, proc.stderr
        assert_absent([value, key.read_text().splitlines()[1]], proc.stdout, proc.stderr)
    assert not out.exists()


@pytest.fixture(scope="module")
def clean_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    bundle = tmp_path_factory.mktemp("planted") / "pytorch-cpu"
    proc = run("render", "pytorch-cpu", "--out", bundle)
    assert proc.returncode == 0, proc.stderr
    proc = run("build", bundle, "--tag", "envbuild-test/planted:x")
    # a clean bundle passes the context's secret check and is refused by the next one: not locked
    assert proc.returncode == 2 and "not locked, so its requirements carry no hashes" in proc.stderr, (
        proc.stderr
    )
    assert "secrets never go into a build context" not in proc.stderr
    return bundle


@pytest.mark.parametrize(
    ("where", "kind"),
    [
        ("certs/corp.crt", "key"),  # a private key dropped into certs/ (copied into the build stages)
        ("certs/extra.key", "key"),
        ("app/.env", "token"),
        ("app/src/config.yaml", "token"),
        ("wheelhouse/notes.txt", "token"),
        ("tools/.netrc", "token"),
        ("deploy.txt", "aws"),
    ],
)
def test_bundle_folder_plants_fail_the_build_before_the_engine(
    clean_bundle: Path, tmp_path: Path, where: str, kind: str
) -> None:
    bundle = tmp_path / "b"
    shutil.copytree(clean_bundle, bundle)
    _cert, key = make_ca(tmp_path)
    values = {
        "key": key.read_text(),
        "token": f"hf_{_token(34)}",
        "aws": f"AKIA{secrets.token_hex(8).upper()}",
    }
    planted = values[kind]
    (bundle / where).parent.mkdir(parents=True, exist_ok=True)
    (bundle / where).write_text(planted if kind == "key" else f"value={planted}\n")
    proc = run("build", bundle, "--tag", "envbuild-test/planted:x")
    assert proc.returncode == 2, (where, proc.stdout, proc.stderr)  # 3 would mean the engine was tried
    assert str(bundle / where) in proc.stderr and "secrets never go into a build context" in proc.stderr
    secret_part = planted.splitlines()[1] if kind == "key" else planted
    assert_absent([secret_part], proc.stdout, proc.stderr)
    assert not list(bundle.glob("build-*.log"))  # refused before a build log was opened


def test_ca_cert_with_a_key_is_refused(clean_bundle: Path, tmp_path: Path) -> None:
    cert, key = make_ca(tmp_path)
    both = tmp_path / "corp-bundle.pem"
    both.write_text(cert.read_text() + key.read_text())
    proc = run("build", clean_bundle, "--tag", "envbuild-test/planted:x", "--ca-cert", both)
    assert proc.returncode == 2 and f"--ca-cert {both}: contains a private key" in proc.stderr, proc.stderr
    assert_absent([key.read_text().splitlines()[1]], proc.stdout, proc.stderr)
    assert_absent([key.read_text().splitlines()[1]], files_text(clean_bundle))


def test_environment_at_validate_time(tmp_path: Path) -> None:
    plants = {
        "OPENAI_KEY": _token(40),  # by name
        "HF_HUB": f"hf_{_token(34)}",  # allowed name, redacted by value
        "OPENAI": f"sk-proj-{_token(40)}",  # not on the allow-list, redacted by value in output
        "PIP_EXTRA_INDEX_URL": f"https://ci:{_token(16)}@mirror.example/simple",
        "DEPLOY_URL": f"https://{_token(24)}@deploy.example/x",
    }
    echo = f"import os; print(*(os.environ[k] for k in {sorted(plants)!r}), sep='\\n'); raise SystemExit(4)"
    lock = cpu_lock(tmp_path, checks=(CheckSpec(name="leaky", run=("python", "-c", echo)),))
    lock_file = tmp_path / "lock.json"
    lock_file.write_text(to_json(lock), encoding="utf-8")
    out = tmp_path / "runs"
    proc = run(
        "validate",
        "--lock",
        lock_file,
        "--out",
        out,
        "--stages",
        "interpreter,os,checks",
        "--workdir",
        tmp_path,
        env=plants,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the check failed, as planted
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    report_text = files_text(run_dir)
    assert_absent(
        [v for v in plants.values()] + [plants["PIP_EXTRA_INDEX_URL"].split(":")[2]],
        report_text,
        proc.stdout,
        proc.stderr,
    )
    # Planted, and seen: the check printed every value (redacted in its output tail) ...
    assert "exit status 4" in report_text and "hf_***" in report_text and "sk-***" in report_text
    assert "https://***@deploy.example/x" in report_text
    # ... and env.txt wrote the allowed names, redacted, and only counted the rest.
    env_txt = (run_dir / "env.txt").read_text().splitlines()
    assert "HF_HUB=hf_***" in env_txt and "PIP_EXTRA_INDEX_URL=https://***@mirror.example/simple" in env_txt
    assert not [line for line in env_txt if line.startswith(("OPENAI", "DEPLOY_URL"))]
    assert env_txt[-1].startswith("# ") and env_txt[-1].endswith(
        "other variables not written (not on the allow-list)"
    )
