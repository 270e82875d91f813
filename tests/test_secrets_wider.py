"""Issue 25 item 3: one credential policy, wider (findings 5, 6, 10 and 14).

Every secret below is made at test time from a random suffix; real credential files go through the
real app check (``envbuild check``/``render`` of a profile with ``[app] source``) and the build
context's re-check (``envbuild build``, refused before any engine); a real ``lock`` against an index
on loopback shows a query token becomes a ``${VAR}`` reference, never a value in the bundle.
"""

from __future__ import annotations

import json
import secrets
import shutil
import sys
from pathlib import Path

import pytest
from index_support import IndexTree, IndexURLs, build_index_tree
from lock_support import clean_env, envbuild, read_lock, render
from secrets_support import assert_absent, run

from envbuild.lock.urls import lock_url
from envbuild.net import redact_url
from envbuild.profile.pep508 import LineError, check_url
from envbuild.report.redact import env_lines
from envbuild.secrets import env_name_reason, file_reason, name_reason, redact, redact_tail, value_reason
from envbuild.validate.checks import TAIL, run_check
from envbuild.validate.run_output import StreamBuffer


def _alnum(n: int) -> str:
    return "".join(
        secrets.choice("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789") for _ in range(n)
    )


def _hex(n: int) -> str:
    return secrets.token_hex(n)[:n]


def credential_files() -> dict[str, tuple[bytes, str]]:
    """Real credential files as their tools write them: path -> (bytes, the secret part in them)."""
    kaggle, pgpw, vault = _hex(32), _alnum(20), f"hvs.{_alnum(90)}"
    aws, ya29, wandb = f"{_alnum(30)}/{_alnum(9)}", f"ya29.{_alnum(120)}", _hex(40)
    ppk = _alnum(60)
    stripe = f"sk_live_{_alnum(24)}"
    return {
        "kaggle.json": (json.dumps({"username": "someone", "key": kaggle}).encode(), kaggle),
        ".pgpass": (f"db.example:5432:app:alice:{pgpw}\n".encode(), pgpw),
        ".streamlit/secrets.toml": (f'[connections.db]\npassword = "{pgpw}"\n'.encode(), pgpw),
        "home/.vault-token": (vault.encode(), vault[4:]),
        "ops/vault.txt": (f"VAULT={vault}\n".encode(), vault[4:]),
        "keys/deploy.ppk": (f"PuTTY-User-Key-File-3: ssh-ed25519\nPrivate-Lines: 1\n{ppk}\n".encode(), ppk),
        "keys/deploy.txt": (f"PuTTY-User-Key-File-3: ssh-ed25519\nPrivate-Lines: 1\n{ppk}\n".encode(), ppk),
        "conf/aws.ini": (f"[default]\naws_access_key_id = x\naws_secret_access_key = {aws}\n".encode(), aws),
        "gcloud/access_tokens.db": (b"SQLite format 3\x00" + ya29.encode() + b"\x00", ya29),
        "gcloud/cache.bin": (b"SQLite format 3\x00" + ya29.encode() + b"\x00", ya29),
        "wandb/settings": (f"[default]\napi_key = {wandb}\n".encode(), wandb),
        "src/pay.py": (f'STRIPE = "{stripe}"\n'.encode(), stripe),
    }


# ---------------------------------------------------------------- finding 5: files and formats


@pytest.mark.parametrize("path", sorted(credential_files()))
def test_each_credential_file_is_refused_by_the_policy(path: str) -> None:
    data, secret = credential_files()[path]
    reason = file_reason(path.rsplit("/", 1)[-1], data)
    assert reason is not None and secret not in reason, path


def test_key_rule_refuses_secret_keys_in_config_files_but_not_model_configuration() -> None:
    value = _alnum(24)
    for name, text in {
        "app.ini": f"[db]\npassword = {value}\n",
        "app.toml": f'[service]\napi_key = "{value}"\n',
        "app.json": json.dumps({"service": {"clientSecret": value}}),
        "app.yaml": f"service:\n  auth_token: '{value}'\n",
        ".env.local": f"export DB_PASSWORD={value}\n",
    }.items():
        assert file_reason(name, text.encode()) is not None, name
    tokenizer = {
        "bos_token": "<|begin_of_text|>",
        "eos_token": "<|end_of_text|>",
        "pad_token": "[PAD]",
        "unk_token": {"content": "<unk>", "lstrip": False},
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 131072,
        "special_tokens_map_file": "/home/user/.cache/special_tokens_map.json",
        "auth_url": "https://login.example.com/oauth2/authorize",
        "secret_name": "production-database-creds",
    }
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        assert file_reason(name, json.dumps(tokenizer, indent=2).encode()) is None


def test_credential_files_fail_the_app_check_and_the_build_context_check(tmp_path: Path) -> None:
    files = credential_files()
    app = tmp_path / "app"
    app.mkdir()
    (app / "main.py").write_text("print('ok')\n")
    profile = tmp_path / "p.toml"
    profile.write_text(
        'name = "p"\nkind = "ubuntu"\n[base]\nos = "debian12"\n[accelerator]\nbackend = "cpu"\n'
        '[python]\nversion = "3.11"\n[app]\nsource = "app"\n'
    )
    proc = run("render", profile, "--out", tmp_path / "bundle")
    assert proc.returncode == 0, proc.stderr
    bundle = tmp_path / "bundle"
    for path, (data, secret) in sorted(files.items()):
        (app / path).parent.mkdir(parents=True, exist_ok=True)
        (app / path).write_bytes(data)
        checked = run("check", profile)
        assert checked.returncode == 2 and "secrets never go into a bundle" in checked.stderr, (path, checked)
        assert_absent([secret], checked.stdout, checked.stderr)
        (app / path).unlink()
        planted = bundle / "app" / path  # the same file dropped into a rendered bundle
        planted.parent.mkdir(parents=True, exist_ok=True)
        planted.write_bytes(data)
        built = run("build", bundle, "--tag", "envbuild-test/wider:x")
        assert built.returncode == 2, (path, built.stdout, built.stderr)  # 3: the engine was asked
        assert "secrets never go into a build context" in built.stderr, (path, built.stderr)
        assert_absent([secret], built.stdout, built.stderr)
        planted.unlink()


# ---------------------------------------------------------------- finding 14: names


def test_names_with_exceptions_and_allow_names(tmp_path: Path) -> None:
    assert name_reason("MAX_TOKENS") is None and name_reason("MAX_NEW_TOKENS") is None
    assert name_reason("KEY_FRAMES") is None and name_reason("HF_TOKEN") == "contains TOKEN"
    assert env_name_reason("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1") is None
    assert env_name_reason("HF_HUB_DISABLE_IMPLICIT_TOKEN", "abc") == "contains TOKEN"
    token = f"hf_{_alnum(34)}"
    head = 'name = "p"\nkind = "ubuntu"\n[base]\nos = "debian12"\n[accelerator]\nbackend = "cpu"\n'
    profile = tmp_path / "p.toml"
    profile.write_text(
        head + '[env]\nMAX_TOKENS = "4096"\nHF_HUB_DISABLE_IMPLICIT_TOKEN = "1"\nKEY_FRAMES = "24"\n'
        'SIGNING_KEY_ID = "team-a"\nallow_names = ["SIGNING_KEY_ID"]\n'
    )
    done = run("check", profile)
    assert done.returncode == 0, done.stderr
    profile.write_text(head + f'[env]\nMY_KEY = "{token}"\nallow_names = ["MY_KEY", "NOPE"]\n')
    refused = run("check", profile)
    assert refused.returncode == 2
    assert "env.MY_KEY" in refused.stderr and "Hugging Face" in refused.stderr  # a token, allowed or not
    assert (
        "env.allow_names[1]" in refused.stderr and "'NOPE' is not a variable of this [env]" in refused.stderr
    )
    assert_absent([token], refused.stdout, refused.stderr)


# ---------------------------------------------------------------- finding 6: URLs


def test_url_rule_is_one_for_redaction_lock_and_requirement_lines() -> None:
    token, path = _alnum(24), _alnum(16)
    cases = {
        f"http://host/simple/?access_token={token}": ("access_token=***", "access_token=${P_ACCESS_TOKEN}"),
        f"https://s.blob.core.windows.net/w.whl?sv=2024&sig={token}": ("sig=***", "sig=${P_SIG}"),
        f"https://dl.cloudsmith.io/{path}/acme/repo/python/simple/": (
            "dl.cloudsmith.io/***/acme",
            "dl.cloudsmith.io/${P_PATH_TOKEN}/acme",
        ),
        f"https://packagecloud.io/priv/{path}/acme/repo/pypi/simple": ("priv/***/", "priv/${P_PATH_TOKEN}/"),
        f"https://pypi.fury.io/{path}/acme/": ("fury.io/***/acme/", "fury.io/${P_PATH_TOKEN}/acme/"),
    }
    for url, (redacted, locked) in cases.items():
        secret = token if token in url else path
        assert redacted in redact_url(url) and secret not in redact_url(url), url
        assert redacted in redact(f"pip said: {url} failed") and value_reason(url) is not None
        assert locked in lock_url(url, "P") and secret not in lock_url(url, "P"), url
        with pytest.raises(LineError):
            check_url(url)
    for harmless in ("https://pypi.fury.io/acme/", "https://dl.cloudsmith.io/public/acme/r/python/simple/"):
        assert redact_url(harmless) == harmless and value_reason(harmless) is None
        check_url(harmless)


def test_env_txt_masks_query_and_path_tokens() -> None:
    token, path = _alnum(24), _alnum(16)
    text = env_lines(
        {
            "PIP_INDEX_URL": f"https://host/simple/?access_token={token}",
            "PIP_EXTRA_INDEX_URL": f"https://dl.cloudsmith.io/{path}/acme/repo/python/simple/",
        }
    )
    assert "PIP_INDEX_URL=https://host/simple/?access_token=***" in text
    assert "PIP_EXTRA_INDEX_URL=https://dl.cloudsmith.io/***/acme/repo/python/simple/" in text
    assert_absent([token, path], text)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> IndexTree:
    return build_index_tree(tmp_path_factory.mktemp("universe"), with_setuptools=False)


def test_lock_writes_a_query_token_as_a_reference(tmp_path: Path, urls: IndexURLs) -> None:
    env = clean_env(tmp_path / "uv-cache")
    token = _alnum(32)
    bundle = render(env, tmp_path, "qtoken", ["fakedep==1.1"])
    done = envbuild(env, "lock", bundle, "--index-url", f"{urls.main}?access_token={token}")
    assert done.returncode == 0, done.stderr
    assert_absent([token], done.stdout, done.stderr)
    texts = [p.read_text(encoding="utf-8") for p in bundle.rglob("*") if p.is_file() and p.suffix != ".whl"]
    assert_absent([token], *texts)
    reference = f"{urls.main}?access_token=${{ENVBUILD_INDEX_1_ACCESS_TOKEN}}"
    assert read_lock(bundle)["resolution"]["index_urls"] == [reference]
    assert f"--index-url {reference}" in (bundle / "requirements-rebuild.txt").read_text(encoding="utf-8")


# ---------------------------------------------------------------- finding 10: redaction before the cut


def test_tail_is_redacted_before_and_after_the_cut(tmp_path: Path) -> None:
    from envbuild.models import CheckSpec

    token = f"ghp_{_alnum(36)}"
    text = f"x {token} " + "y" * 60
    cut = redact_tail(text, 50)  # the cut falls inside the token: its start no longer says "ghp_"
    assert token[10:] not in cut and len(cut) <= 50
    buffer = StreamBuffer(tail_max=40)
    buffer.feed(f"start {token} end of the run\n".encode())
    assert token[-10:].encode() not in buffer.tail and buffer.tail.endswith(b"end of the run\n")
    query = _alnum(24)
    script = tmp_path / "leak.py"
    script.write_text(f"print('fetch https://h/simple/?access_token={query}')\nprint('z' * {TAIL - 30})\n")
    check = CheckSpec(name="leak", run=(sys.executable, str(script)), timeout_s=60)
    entry = run_check(check, tmp_path)
    assert entry["status"] == "passed" and query not in json.dumps(entry)
    shutil.rmtree(tmp_path / "runs", ignore_errors=True)
