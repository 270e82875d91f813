"""The one secret policy (envbuild/secrets.py): names, values, files, redaction, and its users.

Every value below is made at test time from a random suffix (``_rand``): none can match by accident,
and each assertion that a value is *absent* is paired with one that it was planted and recognised.
"""

from __future__ import annotations

import secrets as stdlib_secrets
import string
from pathlib import Path

import pytest
from build_support import make_ca

from envbuild.errors import BundleError, UsageError
from envbuild.image.certs import load_ca_cert
from envbuild.profile.appdir import collect_app
from envbuild.profile.fields import check_env_key, check_env_value
from envbuild.report.redact import env_lines, is_allowed_name, redact_env, redact_text
from envbuild.secrets import (
    MASK,
    REDACTED,
    content_reason,
    file_reason,
    is_secret_name,
    name_reason,
    redact,
    value_reason,
)


def _rand(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(stdlib_secrets.choice(alphabet) for _ in range(n))


def planted_values() -> dict[str, str]:
    """One value per recognised format (the formats' own lengths and alphabets)."""
    upper = string.ascii_uppercase + string.digits
    return {
        "hf": f"hf_{_rand(34)}",
        "openai": f"sk-{_rand(48)}",
        "openai-project": f"sk-proj-{_rand(40)}",
        "anthropic": f"sk-ant-api03-{_rand(40)}",
        "github-classic": f"ghp_{_rand(36)}",
        "github-oauth": f"gho_{_rand(36)}",
        "github-server": f"ghs_{_rand(36)}",
        "github-fine-grained": f"github_pat_{_rand(22)}_{_rand(59)}",
        "gitlab": f"glpat-{_rand(20)}",
        "slack-bot": f"xoxb-{_rand(12, string.digits)}-{_rand(24)}",
        "slack-user": f"xoxp-{_rand(12, string.digits)}-{_rand(24)}",
        "aws-key-id": f"AKIA{_rand(16, upper)}",
        "aws-session-key-id": f"ASIA{_rand(16, upper)}",
        "jwt": f"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOi{_rand(20)}.{_rand(43)}",
    }


def test_names_by_word_parts() -> None:
    secret = [
        "OPENAI_KEY",
        "ANTHROPIC_KEY",
        "KAGGLE_KEY",
        "SSH_KEY",
        "SIGNING_KEY",
        "GITHUB_PAT",
        "PASSPHRASE",
        "GPG_PASSPHRASE",
        "HF_TOKEN",
        "GITTOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "WANDB_API_KEY",
        "DB_PASSWORD",
        "MYSQL_PWD",
        "CLIENTSECRET",
        "GOOGLE_CREDENTIALS",
        "OAUTH_CLIENT",
        "apiKey",
        "hfToken",
    ]
    harmless = [
        "KEYBOARD",
        "MONKEY",
        "TOKENIZERS_PARALLELISM",
        "PATH",
        "PWD",
        "PATCH_LEVEL",
        "GIT_AUTHOR_NAME",
        "CERT_AUTHORITY",
        "HF_HOME",
        "NCCL_DEBUG",
        "KEYMAP",
    ]
    assert [n for n in secret if not is_secret_name(n)] == []
    assert [n for n in harmless if is_secret_name(n)] == []
    assert name_reason("GITHUB_PAT") == "contains PAT" and name_reason("OPENAI_KEY") == "contains KEY"


@pytest.mark.parametrize("kind", sorted(planted_values()))
def test_each_value_format_is_found_and_redacted_without_its_body(kind: str) -> None:
    value = planted_values()[kind]
    assert value_reason(value) is not None, kind
    for text in (value, f"x {value} y", f'"{value}",', f"TOKEN={value}\n"):
        out = redact(text)
        assert value not in out and MASK in out, (kind, out)
        body = value[len(value) // 2 :]  # no tail of the value survives either
        assert body not in out, (kind, out)
    assert redact(f"x {value} y").startswith("x ") and redact(f"x {value} y").endswith(" y")


def test_prefix_inside_a_word_is_not_a_token() -> None:
    assert value_reason(f"task-{_rand(40)}") is None  # "sk-" inside "task-"
    assert value_reason(f"XAKIA{_rand(16, string.ascii_uppercase)}") is None
    assert value_reason("hf_short") is None and value_reason("sk-short") is None


@pytest.mark.parametrize(
    ("template", "shown"),
    [
        ("https://user:{s}@host/simple", "https://***@host/simple"),
        ("https://:{s}@host/simple", "https://***@host/simple"),
        ("https://{s}@github.com/org/repo.git", "https://***@github.com/org/repo.git"),
        ("postgres://admin:{s}@db:5432/x", "postgres://***@db:5432/x"),
        ("git+https://oauth2:{s}@gitlab.example/r.git", "git+https://***@gitlab.example/r.git"),
    ],
)
def test_url_userinfo_in_any_form(template: str, shown: str) -> None:
    value = template.format(s=_rand(16))
    assert value_reason(value) is not None
    assert redact(value) == shown
    assert redact(f"pip: {value} failed") == f"pip: {shown} failed"


def test_ssh_account_names_and_plain_urls_are_not_secrets() -> None:
    for text in ("git+ssh://git@github.com/org/repo.git", "https://pypi.org/simple", "see a@b.example"):
        assert value_reason(text) is None and redact(text) == text


def test_pem_private_keys_of_every_kind(tmp_path: Path) -> None:
    _cert, key = make_ca(tmp_path)  # a real RSA key written by openssl
    pem = key.read_text()
    body = pem.splitlines()[1]
    assert value_reason(pem) == "a private key"
    assert body not in redact(f"before\n{pem}after") and redact(f"before\n{pem}after").startswith("before\n")
    for label in ("RSA PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY", "ENCRYPTED PRIVATE KEY"):
        block = f"-----BEGIN {label}-----\n{_rand(64)}\n-----END {label}-----\n"
        assert value_reason(block) == "a private key" and block.splitlines()[1] not in redact(block)
    truncated = f"-----BEGIN PRIVATE KEY-----\n{_rand(64)}"  # no END line: redacted to the end
    assert truncated.splitlines()[1] not in redact(truncated)


def test_env_keys_and_values_refused_without_echo() -> None:
    for key in (
        "OPENAI_KEY",
        "ANTHROPIC_KEY",
        "KAGGLE_KEY",
        "SSH_KEY",
        "SIGNING_KEY",
        "GITHUB_PAT",
        "PASSPHRASE",
    ):
        problem = check_env_key(key)
        assert problem is not None and "looks like a secret" in problem, key
    assert check_env_key("KEYBOARD") is None and check_env_key("MONKEY") is None
    for value in planted_values().values():
        problem = check_env_value(value)
        assert problem is not None and value not in problem and value[3:] not in problem, value
    url = f"https://:{_rand(12)}@host/x"
    assert "password" in str(check_env_value(url)) and url not in str(check_env_value(url))


def test_files_by_name_and_by_content(tmp_path: Path) -> None:
    _cert, key = make_ca(tmp_path)
    by_name = [
        ".env",
        ".env.production",
        ".envrc",
        ".netrc",
        ".pypirc",
        ".git-credentials",
        "credentials.json",
        "service-account-prod.json",
        "kubeconfig",
        "id_rsa",
        "id_ed25519",
        "store.p12",
    ]
    assert [n for n in by_name if file_reason(n) is None] == []
    for ok in ("id_rsa.pub", "id_utils.py", "keyboard.py", "server.pem", "tls.key", "config.json"):
        assert file_reason(ok, b"harmless\n") is None, ok
    assert file_reason("server.pem", key.read_bytes()) == "holds a private key"
    assert file_reason("tls.key", key.read_bytes()) == "holds a private key"
    assert file_reason("tls.key", b"\x30\x82\x04\xa4\x02\x01") == "is a private key (DER)"
    hf = planted_values()["hf"]
    assert file_reason("settings.yaml", f"token: {hf}\n".encode()) == "holds a Hugging Face access token"
    google = b'{"type": "service_account", "private_key": "x", "client_email": "a@b"}'
    assert content_reason(google) == "a cloud service-account key"


def test_content_scan_of_prefixes_without_secrets_finds_none() -> None:
    """16 MiB of random bytes, and of text dense with every format's prefix, hold no secret.
    (Its speed, linear in the size, is measured by bench/secret_scan.py, not asserted here.)"""
    chunk = b"import x  # https://pytorch.org/docs sk- hf_ ghp_ eyJ AKIA :// -----BEGIN \n"
    for data in (stdlib_secrets.token_bytes(16 << 20), chunk * ((16 << 20) // len(chunk))):
        assert content_reason(data) is None


def test_app_folder_walker_refuses_credentials_and_keys(tmp_path: Path) -> None:
    _cert, key = make_ca(tmp_path)
    cases = {
        "credentials.json": b"{}",
        "service-account-x.json": b"{}",
        ".envrc": b"export A=1\n",
        "kubeconfig": b"apiVersion: v1\n",
        "conf/.netrc": b"machine h\n",
        "id_ed25519": b"x",
        "certs/server.pem": key.read_bytes(),
        "src/settings.py": f"TOKEN = '{planted_values()['github-classic']}'\n".encode(),
    }
    for name, data in cases.items():
        app = tmp_path / f"app-{len(list(tmp_path.iterdir()))}"
        (app / name).parent.mkdir(parents=True)
        (app / "main.py").write_text("print('hi')\n")
        (app / name).write_bytes(data)
        for read in (True, False):  # render (reads) and check (checks only) refuse the same folder
            with pytest.raises(BundleError, match=rf"{name} .*secrets never go into a bundle") as info:
                collect_app(app, "p.toml: app.source", read=read)
            assert data.decode("latin-1") not in str(info.value)
    clean = tmp_path / "clean"
    (clean / "certs").mkdir(parents=True)
    (clean / "certs" / "ca.pem").write_bytes(_cert.read_bytes())  # a public certificate may stay
    assert set(collect_app(clean, "w").files) == {"certs/ca.pem"}


def test_ca_cert_file_with_a_key_or_token_is_refused_without_echo(tmp_path: Path) -> None:
    cert, key = make_ca(tmp_path)
    both = tmp_path / "both.pem"
    both.write_bytes(cert.read_bytes() + key.read_bytes())
    with pytest.raises(UsageError, match="contains a private key") as info:
        load_ca_cert(both)
    assert key.read_text().splitlines()[1] not in str(info.value)
    assert load_ca_cert(cert).count == 1


def test_env_txt_allow_list_and_redaction() -> None:
    values = planted_values()
    env = {
        "PATH": "/opt/venv/bin:/usr/bin",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "HF_HOME": "/cache/hf",
        "HF_HUB": values["hf"],  # allowed name, secret value: redacted by value
        "HF_TOKEN": "x" * 20,  # allowed family, secret name: withheld whole
        "PIP_EXTRA_INDEX_URL": f"https://u:{_rand(10)}@mirror.example/simple",
        "OPENAI": values["openai"],  # not on the list: counted, not written
        "KEYBOARD": "us",
        "MY_APP_SETTING": "1",
    }
    assert (
        is_allowed_name("PYTHONPATH") and is_allowed_name("XDG_CACHE_HOME") and not is_allowed_name("OPENAI")
    )
    text = env_lines(env)
    lines = text.splitlines()
    assert "HF_HUB=hf_***" in lines and f"HF_TOKEN={REDACTED}" in lines
    assert "PIP_EXTRA_INDEX_URL=https://***@mirror.example/simple" in lines
    assert "CUDA_VISIBLE_DEVICES=0,1" in lines and "HF_HOME=/cache/hf" in lines
    assert lines[-1] == "# 3 other variables not written (not on the allow-list)"
    assert not [v for v in env.values() if len(v) > 8 and v in text and not v.startswith("/")]
    assert "OPENAI" not in redact_env(env) and "KEYBOARD" not in text
    # Free text: the value of a secret-named variable goes wherever it appears, formats by themselves.
    free = f"got {'x' * 20} and {values['openai']} from https://:{_rand(8)}@h/x"
    assert redact_text(free, env) == f"got {REDACTED} and sk-*** from https://***@h/x"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from build_support import envbuild

    bundle = tmp_path_factory.mktemp("secrets") / "pytorch-cpu"
    proc = envbuild("render", "pytorch-cpu", "--out", bundle)
    assert proc.returncode == 0, proc.stderr
    return bundle


def test_write_context_rechecks_before_writing(rendered: Path, tmp_path: Path) -> None:
    """The library path (build_image -> write_context) refuses what the CLI refuses, before any byte."""
    import io
    import shutil

    from envbuild.image.context import write_context

    bundle = tmp_path / "b"
    shutil.copytree(rendered, bundle)
    assert write_context(bundle, io.BytesIO()).files > 3  # clean: written
    token = planted_values()["gitlab"]
    (bundle / "tools" / "pip.conf").write_text(
        f"[global]\nindex-url = https://ci:{token}@pkgs.example/simple\n"
    )
    out = io.BytesIO()
    with pytest.raises(BundleError, match=r"tools/pip.conf: holds a GitLab access token") as info:
        write_context(bundle, out)
    assert out.getvalue() == b"" and token not in str(info.value)


def test_ca_cert_with_an_old_dockerfile_needs_a_rerender_or_keep(rendered: Path, tmp_path: Path) -> None:
    """A bundle rendered before the CA-selection stages would keep the CA: refused unless --keep-ca-cert."""
    import shutil

    from envbuild.image.build import build_args, build_image

    bundle = tmp_path / "old"
    shutil.copytree(rendered, bundle)
    dockerfile = bundle / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text().replace("AS envbuild-final-ca", "AS final-ca"))
    cert, _ = make_ca(tmp_path)
    with pytest.raises(BundleError, match=r"re-render the bundle .* or pass --keep-ca-cert"):
        build_image(bundle, "envbuild-test/old:x", ca_certs=(cert,), client=object())
    assert build_args(None, False) == {} and build_args("b:1", True) == {
        "BASE_IMAGE": "b:1",
        "FINAL_CA": "envbuild-ca",
    }


def test_placeholders_and_redacted_forms_are_not_secrets() -> None:
    """Redacted output, docs and templates stay quiet: only a real credential is flagged."""
    for text in (
        "https://***@host/simple",
        "https://user:***@host/simple",
        "https://[REDACTED]@host/x",
        "name @ git+https://...@REV",
        "https://${GITHUB_TOKEN}@github.com/org/repo",
        "https://$TOKEN@github.com/org/repo",
        "https://<token>@gitlab.example/r",
    ):
        assert value_reason(text) is None and redact(text) == text, text
    assert value_reason(redact(f"https://u:{_rand(12)}@h/x")) is None  # redacting twice changes nothing
