"""Adversarial review of the loader: TOML tricks, invisible Unicode, sizes, extends and path tricks.

Every case must give a ProfileError whose issue names the file and the key, and `envbuild check` /
`envbuild render --force` must exit 2 without a traceback and without writing anything.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_support import invoke

from envbuild.errors import Issue, ProfileError
from envbuild.profile import load_profile

HEAD = 'name = "p"\nkind = "custom"\n'
Setup = Callable[[Path], None]

# (id, TOML after HEAD, key of the single issue ("" = the whole file), words the message contains)
TOML_CASES: list[tuple[str, str, str, str]] = [
    ("dotted-key", 'python.version = "3.11"\npython.bogus = 1\n', "python.bogus", "valid keys"),
    ("inline-env-secret", 'env = { A = "1", HF_TOKEN = "x" }\n', "env.HF_TOKEN", "run time"),
    ("inline-nested", 'python = { version = "3.11", extra = { a = 1 } }\n', "python.extra", "valid keys"),
    ("aot-python", '[[python]]\nversion = "3.11"\n', "python", "must be a table"),
    ("aot-env", '[[env]]\nA = "1"\n', "env", "must be a table"),
    ("env-subtable", '[env.X]\nY = "1"\n', "env.X", "must be a string"),
    ("checks-table", '[checks]\nname = "x"\n', "checks", "array of tables"),
    ("checks-mixed", 'checks = [{ name = "a", run = ["true"] }, 3]\n', "checks", "array of tables"),
    ("huge-int", "[resources]\ngpus = 99999999999999999999999999999999\n", "resources.gpus", "<= 64"),
    ("neg-zero", "[resources]\ngpu_memory_gib = -0.0\n", "resources.gpu_memory_gib", "> 0"),
    ("nan-int", "[resources]\ngpus = nan\n", "resources.gpus", "integer"),
    ("datetime", "description = 1979-05-27T07:32:00Z\n", "description", "must be a string"),
    ("deep-array", "x = " + "[" * 5000 + "]" * 5000 + "\n", "", "nest too deeply"),
    ("deep-table", "[" + ".".join(["a"] * 2000) + "]\n", "a", "valid keys"),
    ("lookalike-name", "", "name", "profile name"),  # the name is in HEADS
    ("lookalike-apt", '[system]\napt = ["g\u0456t"]\n', "system.apt[0]", "Debian package name"),
    ("fullwidth-digits", '[python]\nversion = "3.\uff11\uff11"\n', "python.version", "MAJOR.MINOR"),
    ("arabic-digits", '[accelerator]\nversion = "\u0661\u0662.8"\n', "accelerator.version", "MAJOR.MINOR"),
    ("lookalike-image", '[base]\nimage = "ubunt\u0443:24.04"\n', "base.image", "non-ASCII"),
    ("rtl-description", 'description = "safe \u202e exe.txt"\n', "description", "U+202E"),
    ("rtl-env", '[env]\nA = "x\u2066y"\n', "env.A", "direction-changing"),
    ("zero-width-desc", 'description = "a\u200bb"\n', "description", "U+200B"),
    ("zero-width-key", '[env]\n"A\u200b" = "1"\n', "env.'A\\u200b'", "variable name"),
    ("bom-in-value", '[env]\nA = "\ufeffx"\n', "env.A", "U+FEFF"),
    ("line-separator", 'description = "a\u2028RUN evil"\n', "description", "U+2028"),
    ("nel", 'description = "a\u0085RUN evil"\n', "description", "U+0085"),
    ("cr", 'description = "a\\rRUN x"\n', "description", "control characters"),
    ("tab-env", '[env]\nA = "a\\tb"\n', "env.A", "tabs"),
    ("tab-description", 'description = "a\\tb"\n', "description", "tabs"),
    ("bidi-argv", '[[checks]]\nname = "a"\nrun = ["echo", "\u202e"]\n', "checks[0].run[1]", "U+202E"),
    ("bidi-path", '[validate]\ncheckpoint_dir = "ck\u202ept"\n', "validate.checkpoint_dir", "control"),
    ("long-description", 'description = "' + "x" * 200_000 + '"\n', "description", "too long"),
    ("long-env", '[env]\nA = "' + "x" * 100_000 + '"\n', "env.A", "too long"),
    (
        "long-list",
        "[system]\napt = [" + ",".join(f'"p{i}"' for i in range(2000)) + "]\n",
        "system.apt",
        "at most",
    ),
    ("huge-version", '[torch]\nversion = "' + "9" * 5000 + '"\n', "torch.version", "torch version"),
    ("version-space", '[torch]\nversion = " 2.7.1"\n', "torch.version", "torch version"),
    ("dup-targets", '[accelerator]\ntargets = ["h100", "h100"]\n', "accelerator.targets[1]", "listed twice"),
    ("dup-devices", '[blender]\ndevices = ["CUDA", "CUDA"]\n', "blender.devices[1]", "listed twice"),
    ("win-path", '[validate]\ncheckpoint_dir = "C:\\\\temp"\n', "validate.checkpoint_dir", "forward slashes"),
    (
        "unc-path",
        '[[checks]]\nname = "a"\nrun = ["true"]\nexpect_files = ["\\\\\\\\srv\\\\share"]\n',
        "checks[0].expect_files[0]",
        "backslashes",
    ),
    ("dot-dot-mid", '[validate]\ncheckpoint_dir = "a/./../../b"\n', "validate.checkpoint_dir", "'..'"),
    (
        "json-key-escape",
        '[[checks]]\nname = "a"\nrun = ["true"]\nexpect_json = { "../x.json:a" = 1 }\n',
        "checks[0].expect_json.'../x.json:a'",
        "'..'",
    ),
    (
        "pkg-marker-option",
        "[python]\npackages = [\"numpy; os_name == 'x -i https://evil.example/simple'\"]\n",
        "python.packages[0]",
        "' -' as an option",
    ),
    (
        "pkg-marker-comment",
        "[python]\npackages = [\"numpy; os_name == 'a #b'\"]\n",
        "python.packages[0]",
        "comment",
    ),
    (
        "pkg-url-continuation",
        '[python]\npackages = ["x @ https://h.example/x-1.0.tar.gz#\\\\", "torch==2.7.1"]\n',
        "python.packages[0]",
        "backslashes",
    ),
    ("name-trailing-dash", "", "name", "image name envbuild/train-"),
    ("extends-url", 'extends = "https://evil.example/p.toml"\n', "extends", "URL"),
    ("extends-list", 'extends = ["pytorch", "blender"]\n', "extends", "must be a string"),
    ("extends-empty", 'extends = ""\n', "extends", "built-in profile name"),
    ("extends-dotdot", 'extends = "pytorch/../blender"\n', "extends", "'..'"),
]
HEADS = {
    "lookalike-name": 'name = "\u0440ytorch"\nkind = "custom"\n',  # Cyrillic 'р'
    "name-trailing-dash": 'name = "train-"\nkind = "custom"\n',
}


def _write(folder: Path, text: str, head: str = HEAD) -> Path:
    path = folder / "p.toml"
    path.write_text(head + text, encoding="utf-8")
    return path


def _issues(path: Path) -> list[Issue]:
    with pytest.raises(ProfileError) as info:
        load_profile(str(path))
    return list(info.value.issues)


def _cli_refuses(path: Path, out: Path, reporter: Path, key: str) -> None:
    from envbuild.cli import _check, _render, cli  # noqa: F401 - registers the commands

    named = f"{reporter}: {key}: " if key else f"{reporter}: "
    for args in (["check", str(path)], ["render", str(path), "--out", str(out), "--force"]):
        result = invoke(args)
        assert result.exit_code == 2, result.output
        assert "Traceback" not in result.output
        assert named in result.output
    assert not out.exists()


@pytest.mark.parametrize(("case", "text", "key", "needle"), TOML_CASES, ids=[c[0] for c in TOML_CASES])
def test_hostile_toml_is_named_by_file_and_key(
    tmp_path: Path, case: str, text: str, key: str, needle: str
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    path = _write(project, text, HEADS.get(case, HEAD))
    issues = _issues(path)
    assert [(i.file, i.key) for i in issues] == [(str(path), key)], issues
    assert needle in issues[0].message
    _cli_refuses(path, tmp_path / "bundle", path, key)


def _link(name: str, target: str | Callable[[Path], Path]) -> Setup:
    def setup(folder: Path) -> None:
        (folder / name).symlink_to(target(folder) if callable(target) else target)

    return setup


def _files(named: dict[str, str | bytes]) -> Setup:
    def setup(folder: Path) -> None:
        for name, body in named.items():
            (folder / name).write_bytes(body if isinstance(body, bytes) else body.encode())

    return setup


def _loop(folder: Path) -> None:
    (folder / "loop.toml").symlink_to(folder / "loop2.toml")
    (folder / "loop2.toml").symlink_to(folder / "loop.toml")


# (id, TOML after HEAD, set-up of the folder, file that reports (relative), key, words)
EXTENDS_CASES: list[tuple[str, str, Setup | None, str, str, str]] = [
    ("self-dot", 'extends = "./p.toml"\n', None, "p.toml", "extends", "cycle: p.toml -> p.toml"),
    ("self-dots", 'extends = "././p.toml"\n', None, "p.toml", "extends", "cycle"),
    ("self-symlink", 'extends = "link.toml"\n', _link("link.toml", "p.toml"), "p.toml", "extends", "cycle"),
    ("symlink-loop", 'extends = "loop.toml"\n', _loop, "p.toml", "extends", "cannot be resolved"),
    (
        "parent-dir",
        'extends = "d.toml"\n',
        lambda f: (f / "d.toml").mkdir(),
        "p.toml",
        "extends",
        "regular file",
    ),
    (
        "parent-binary",
        'extends = "b.toml"\n',
        _files({"b.toml": b"\x00\xff\x89PNG"}),
        "b.toml",
        "",
        "not UTF-8",
    ),
    (
        "parent-not-toml",
        'extends = "b.toml"\n',
        _files({"b.toml": "this = = no"}),
        "b.toml",
        "",
        "not valid TOML",
    ),
    (
        "parent-fifo",
        'extends = "f.toml"\n',
        lambda f: os.mkfifo(f / "f.toml"),
        "p.toml",
        "extends",
        "regular file",
    ),
    ("parent-device", 'extends = "z.toml"\n', _link("z.toml", "/dev/zero"), "p.toml", "extends", "outside"),
    ("parent-huge", 'extends = "b.toml"\n', _files({"b.toml": "#" * (5 << 20)}), "b.toml", "", "too large"),
    (
        "parent-outside",
        'extends = "o.toml"\n',
        _link("o.toml", lambda f: f.parent / "outside.toml"),
        "p.toml",
        "extends",
        "outside the profile's folder",
    ),
    (
        "parent-error",
        'extends = "b.toml"\n',
        _files({"b.toml": 'name = "b"\nkind = "custom"\n[env]\nHF_TOKEN = "x"\n'}),
        "b.toml",
        "env.HF_TOKEN",
        "run time",
    ),
    (
        "reqs-device",
        '[python]\nrequirements = ["z.txt"]\n',
        _link("z.txt", "/dev/zero"),
        "p.toml",
        "python.requirements[0]",
        "outside",
    ),
    (
        "reqs-fifo",
        '[python]\nrequirements = ["f.txt"]\n',
        lambda f: os.mkfifo(f / "f.txt"),
        "p.toml",
        "python.requirements[0]",
        "regular file",
    ),
    ("app-link-out", '[app]\nsource = "app"\n', _link("app", "/etc"), "p.toml", "app.source", "outside"),
]


def _chain(folder: Path) -> None:
    for i in range(20):
        (folder / f"l{i}.toml").write_text(f'extends = "l{i + 1}.toml"\n', encoding="utf-8")
    (folder / "l20.toml").write_text('name = "x"\nkind = "custom"\n', encoding="utf-8")


EXTENDS_CASES.append(("deep-chain", 'extends = "l0.toml"\n', _chain, "l14.toml", "extends", "deeper than 16"))


@pytest.mark.parametrize(
    ("text", "setup", "reporter", "key", "needle"),
    [c[1:] for c in EXTENDS_CASES],
    ids=[c[0] for c in EXTENDS_CASES],
)
def test_extends_and_path_tricks(
    tmp_path: Path, text: str, setup: Setup | None, reporter: str, key: str, needle: str
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "outside.toml").write_text('name = "o"\nkind = "custom"\n', encoding="utf-8")
    if setup is not None:
        setup(project)
    path = _write(project, text)
    issues = _issues(path)
    assert [(i.file, i.key) for i in issues] == [(str(project / reporter), key)], issues
    assert needle in issues[0].message
    _cli_refuses(path, tmp_path / "bundle", project / reporter, key)


def test_chain_through_two_files_to_a_builtin_merges_each_once(tmp_path: Path) -> None:
    (tmp_path / "b.toml").write_text(
        'name = "b"\nkind = "custom"\nextends = "c.toml"\n[system]\napt = ["git"]\n', encoding="utf-8"
    )
    (tmp_path / "c.toml").write_text(
        'name = "c"\nkind = "custom"\nextends = "pytorch"\n[system]\napt = ["git", "curl"]\n',
        encoding="utf-8",
    )
    path = _write(tmp_path, 'extends = "b.toml"\n[system]\napt = ["curl", "jq"]\n')
    profile = load_profile(str(path))
    assert profile.system.apt.count("git") == 1 and profile.system.apt.count("curl") == 1
    assert profile.system.apt[-1] == "jq"
    assert profile.torch.version == load_profile("pytorch").torch.version


def test_every_problem_of_a_hostile_file_comes_at_once(tmp_path: Path) -> None:
    text = (
        'description = "x\u202ey"\n[env]\nA = "a\\tb"\nHF_TOKEN = "x"\n'
        '[accelerator]\ntargets = ["h100", "h100"]\n[torch]\nversion = "' + "9" * 5000 + '"\n'
    )
    issues = _issues(_write(tmp_path, text))
    assert sorted(i.key for i in issues) == [
        "accelerator.targets[1]",
        "description",
        "env.A",
        "env.HF_TOKEN",
        "torch.version",
    ]


@pytest.mark.parametrize(
    "body",
    [
        "x" + " " * 3_000_000 + "y\n",  # pip's comment regex is quadratic on a run of blanks
        "x @ https://h.example/" + "a" * 3_000_000 + " y\n",  # the password-in-URL regex was too
        "x==${" + "${" * 1_000_000 + "\n",
    ],
    ids=["blank-run", "letter-run", "dollar-brace-run"],
)
def test_huge_hostile_lines_are_refused_quickly_with_a_short_message(tmp_path: Path, body: str) -> None:
    import time

    (tmp_path / "r.txt").write_text(body, encoding="utf-8")
    path = _write(tmp_path, '[python]\nrequirements = ["r.txt"]\n')
    started = time.monotonic()
    issues = _issues(path)
    assert time.monotonic() - started < 30  # was hours before the linear-time rewrite
    assert [i.key for i in issues] == ["python.requirements[0] line 1"]
    assert len(str(issues[0])) < 1200 and "characters in all" in issues[0].message


def test_huge_values_give_short_messages(tmp_path: Path) -> None:
    huge = "A" * 1_000_000 + "!"
    text = f'[base]\nimage = "{huge}"\n[env]\n"{huge}" = "1"\n[accelerator]\ntargets = ["{huge}"]\n'
    issues = _issues(_write(tmp_path, text))
    assert len(issues) == 3
    assert all(len(str(issue)) < 1200 + len(str(tmp_path)) for issue in issues)


def test_a_huge_valid_url_is_checked_for_secrets_in_linear_time(tmp_path: Path) -> None:
    import time

    (tmp_path / "r.txt").write_text(
        "x @ https://h.example/" + "a" * 3_000_000 + ".tar.gz\n", encoding="utf-8"
    )
    started = time.monotonic()
    lines = load_profile(str(_write(tmp_path, '[python]\nrequirements = ["r.txt"]\n'))).python.lines
    assert time.monotonic() - started < 30
    assert [line.name for line in lines] == ["x"]
