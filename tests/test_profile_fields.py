"""The string validators on their own: Docker references, Debian names, env keys, paths, versions."""

from __future__ import annotations

import pytest

from envbuild.profile import fields as f

GOOD_IMAGES = [
    "ubuntu",
    "ubuntu:24.04",
    "nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04",
    "rocm/dev-ubuntu-24.04:6.3.4-complete",
    "docker.io/library/debian:12",
    "localhost:5000/team/img",
    "registry.example.com:5000/a/b/c:tag_1.2-x",
    "envbuild/debian:12",
    "my__name/with-dashes---ok:1",
    "ubuntu@sha256:" + "0123456789abcdef" * 4,
    "ghcr.io/org/img:v1@sha256:" + "a" * 64,
    "[::1]:5000/img:1",
]
BAD_IMAGES = [
    "",
    "Ubuntu",
    "ubuntu:",
    "ubuntu:24.04\nRUN x",
    "ubuntu:24.04 ",
    " ubuntu",
    "ubuntu;rm -rf /",
    "ubuntu:$(id)",
    "-ubuntu",
    "a//b",
    "ubuntu:" + "x" * 129,
    "ubuntu@sha256:abc",
    "ubuntu:latest@md5",
    "ubüntu",
    "ubuntu/",
]


@pytest.mark.parametrize("ref", GOOD_IMAGES)
def test_good_image_references(ref: str) -> None:
    assert f.check_image(ref) is None


@pytest.mark.parametrize("ref", BAD_IMAGES)
def test_bad_image_references(ref: str) -> None:
    assert f.check_image(ref) is not None


@pytest.mark.parametrize(
    "name", ["git", "libstdc++6", "python3.11-venv", "g++", "git=1:2.39.5-0+deb12u2", "xz-utils"]
)
def test_good_apt(name: str) -> None:
    assert f.check_apt(name) is None


@pytest.mark.parametrize(
    "name", ["g", "Git", "git;rm", "git rm", "-git", "git=", "git=abc", "git=1 && x", "git\n", "git=1.0$(x)"]
)
def test_bad_apt(name: str) -> None:
    assert f.check_apt(name) is not None


@pytest.mark.parametrize(
    "key",
    [
        "HF_TOKEN",
        "hf_token",
        "GITHUB_TOKEN",
        "ACCESSTOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_ACCESS_KEY_ID",
        "OPENAI_API_KEY",
        "APIKEY",
        "DB_PASSWORD",
        "MYSQL_PASSWD",
        "SSH_PRIVATE_KEY",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "BASIC_AUTH",
        "AUTHORIZATION",
        "NPM_AUTH",
        "CLIENT_SECRET",
        "SECRETS_FILE",
        "DB_PASS",
    ],
)
def test_secret_keys(key: str) -> None:
    message = f.check_env_key(key)
    assert message is not None and "provide secrets at run time, never in the profile" in message


@pytest.mark.parametrize(
    "key",
    [
        "TOKENIZERS_PARALLELISM",
        "GIT_AUTHOR_NAME",
        "AUTHOR",
        "HF_HOME",
        "OMP_NUM_THREADS",
        "PASSAGE",
        "KEYBOARD",
        "CERT_AUTHORITY",
    ],
)
def test_not_secret_keys(key: str) -> None:
    assert f.check_env_key(key) is None


@pytest.mark.parametrize(
    "path", ["a", "a/b.txt", "runs/pilot/summary.json", ".hidden", "a/./b", "dir/", "a..b/c", "..a"]
)
def test_good_rel_paths(path: str) -> None:
    assert f.check_rel_path(path) is None


@pytest.mark.parametrize(
    "path",
    ["", "/etc/passwd", "../x", "a/../../x", "..", "~/x", "~root", "a\\b", "a\nb", "a\x00b", "x" * 600],
)
def test_bad_rel_paths(path: str) -> None:
    assert f.check_rel_path(path) is not None


@pytest.mark.parametrize(
    ("check", "good", "bad"),
    [
        (f.check_python_version, ["3.11", "3.12", "3.10"], ["3", "3.11.2", "2.7", "3.x", "3.11\n"]),
        (
            f.check_accel_version,
            ["12.8", "6.3", "6.2.4", "13.0"],
            ["12", "cu128", "12.8\n", "v12.8", "12.8.1.1"],
        ),
        (f.check_blender_version, ["4.5.3", "4.2"], ["4", "4.5.3-lts", "latest"]),
        (f.check_target, ["h100", "rtx4090", "mi300x", "cpu"], ["H100", "", "h100 ", "h100;x", "a" * 40]),
        (
            f.check_module,
            ["flash_attn", "apex.normalization", "xformers"],
            ["flash-attn", "1abc", "a..b", "os;x"],
        ),
    ],
)
def test_versions_and_ids(check: object, good: list[str], bad: list[str]) -> None:
    assert callable(check)
    assert [v for v in good if check(v) is not None] == []
    assert [v for v in bad if check(v) is None] == []


def test_pep440_torch_versions() -> None:
    assert f.check_pep440("2.7.1", what="torch version") is None
    assert f.check_pep440("2.9.0rc1", what="torch version") is None
    assert "local tag" in (f.check_pep440("2.7.1+cu128", what="torch version") or "")
    assert f.check_pep440("two", what="torch version") is not None
    assert f.check_pep440(" 2.7.1", what="torch version") is not None


def test_env_values() -> None:
    assert f.check_env_value("/workspace/.cache/hf") is None
    # a tab would reach a Dockerfile ENV line, where the renderer refuses every control character
    assert f.check_env_value("tab\tis not") is not None
    assert f.check_env_value('it\'s "q" \\ $HOME `id` {{ x }}') is None
    assert f.check_env_value("bidi\u202eoverride") is not None
    assert f.check_env_value("emoji \U0001f468\u200d\U0001f4bb stays") is None
    assert f.check_env_value("a\nRUN evil") is not None
    assert f.check_env_value("a\rb") is not None
    assert f.check_env_value("https://bob:pw@host/x") is not None
    assert f.check_env_value("AKIAABCDEFGHIJKLMNOP") is not None


def test_did_you_mean() -> None:
    assert f.did_you_mean("pyhton", ["python", "torch"]) == " (did you mean 'python'?)"
    assert f.did_you_mean("zzz", ["python", "torch"]) == ""
