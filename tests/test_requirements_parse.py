"""Requirement files in pip's real syntax: real-world files go through whole, and agree with pip."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from envbuild.errors import ProfileError
from envbuild.models import RequirementLine
from envbuild.profile import load_profile

DATA = Path(__file__).parent / "data" / "profiles" / "project"


def _lines(tmp_path: Path, body: str, files: dict[str, str] | None = None) -> tuple[RequirementLine, ...]:
    (tmp_path / "requirements.txt").write_text(body, encoding="utf-8")
    for name, text in (files or {}).items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    profile = tmp_path / "p.toml"
    profile.write_text('name = "p"\nkind = "custom"\n[python]\nrequirements = ["requirements.txt"]\n')
    return load_profile(str(profile)).python.lines


def _errors(tmp_path: Path, body: str, files: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ProfileError) as info:
        _lines(tmp_path, body, files)
    return [str(issue) for issue in info.value.issues]


def _pip_view(path: Path) -> list[tuple[str, tuple[str, ...], str]]:
    """What pip itself reads from a file: (canonical name, sha256 hashes, marker) per requirement."""
    from packaging.utils import canonicalize_name
    from pip._internal.network.session import PipSession
    from pip._internal.req.constructors import install_req_from_parsed_requirement
    from pip._internal.req.req_file import parse_requirements

    out: list[tuple[str, tuple[str, ...], str]] = []
    for parsed in parse_requirements(str(path), session=PipSession()):
        if parsed.constraint:
            continue
        req = install_req_from_parsed_requirement(parsed)
        hashes = tuple(f"sha256:{h}" for h in (parsed.options or {}).get("hashes", {}).get("sha256", []))
        assert req.name is not None
        out.append((canonicalize_name(req.name), hashes, str(req.markers or "")))
    return out


def _our_view(lines: tuple[RequirementLine, ...]) -> list[tuple[str, tuple[str, ...], str]]:
    from packaging.requirements import Requirement

    out = []
    for line in lines:
        if line.kind == "requirement":
            assert line.name is not None
            out.append((line.name, line.hashes, str(Requirement(line.text).marker or "")))
    return out


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # pip vendors pkg_resources
@pytest.mark.parametrize("name", ["locked.txt", "mixed.txt", "uv-compiled.txt"])
def test_real_world_files_agree_with_pip(tmp_path: Path, name: str) -> None:
    shutil.copytree(DATA / "reqs", tmp_path / "reqs")
    (tmp_path / "p.toml").write_text(
        f'name = "p"\nkind = "custom"\n[python]\nrequirements = ["reqs/{name}"]\n'
    )
    ours = load_profile(str(tmp_path / "p.toml")).python.lines
    assert _our_view(ours) == _pip_view(tmp_path / "reqs" / name)


def test_pip_compile_output_keeps_every_pin_hash_and_index(tmp_path: Path) -> None:
    shutil.copytree(DATA / "reqs", tmp_path / "reqs")
    (tmp_path / "p.toml").write_text(
        'name = "p"\nkind = "custom"\n[python]\nrequirements = ["reqs/locked.txt"]\n'
    )
    lines = load_profile(str(tmp_path / "p.toml")).python.lines
    options = [line.text for line in lines if line.kind == "option"]
    assert options == [
        "--index-url https://pypi.org/simple",
        "--extra-index-url https://download.pytorch.org/whl/cpu",
    ]
    reqs = [line for line in lines if line.kind == "requirement"]
    source = (DATA / "reqs" / "locked.txt").read_text()
    assert len(reqs) == source.count("==") == 18
    assert sum(len(r.hashes) for r in reqs) == source.count("--hash=sha256:")
    assert all(r.text.startswith(f"{r.name}==") or r.name == "python-dateutil" for r in reqs)
    exc = next(r for r in reqs if r.name == "exceptiongroup")
    assert exc.text == 'exceptiongroup==1.3.0; python_version < "3.11"'
    assert exc.origin == "reqs/locked.txt:19"
    assert not any("via" in line.text for line in lines)


def test_mixed_file_options_includes_and_urls(tmp_path: Path) -> None:
    shutil.copytree(DATA / "reqs", tmp_path / "reqs")
    (tmp_path / "p.toml").write_text(
        'name = "p"\nkind = "custom"\n[python]\nrequirements = ["reqs/mixed.txt"]\n'
    )
    lines = load_profile(str(tmp_path / "p.toml")).python.lines
    by_name = {line.name: line for line in lines if line.kind == "requirement"}
    assert [line.text for line in lines if line.kind == "include"] == ["-r base.txt", "-r nested/more.txt"]
    assert by_name["tqdm"].origin == "reqs/nested/more.txt:1"
    assert "-c constraints.txt" in [line.text for line in lines if line.kind == "option"]
    assert "--only-binary :all:" in [line.text for line in lines]
    assert by_name["peft"].text == "peft @ git+https://github.com/huggingface/peft.git@v0.11.1"
    assert by_name["six"].text.startswith("six @ https://files.pythonhosted.org/")
    assert by_name["six"].text.endswith(
        "#sha256=8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254"
    )
    assert by_name["numpy"].text == 'numpy>=1.26; platform_machine == "x86_64"'
    assert by_name["requests"].text == 'requests[security,socks]<3,>=2.31; python_version >= "3.9"'
    assert by_name["django"].text == "Django>=4.2"
    assert by_name["pkg-with-hash"].hashes == ("sha256:" + "0" * 64, "sha256:" + "1" * 64)


def test_continuations_comments_and_crlf(tmp_path: Path) -> None:
    body = (
        "# comment line ending in a backslash does not continue \\\r\n"
        "alpha==1.0\r\n"
        "beta \\\r\n"
        "  >=2.0 \\\r\n"
        "  # a comment in the middle of a continuation\r\n"
        "\r\n"
        "gamma[x]  # trailing\r\n"
        "delta @ https://example.org/delta-1.0-py3-none-any.whl#sha256=" + "a" * 64 + "\r\n"
    )
    lines = _lines(tmp_path, body)
    assert [(line.text, line.origin) for line in lines] == [
        ("alpha==1.0", "requirements.txt:2"),
        ("beta>=2.0", "requirements.txt:3"),
        ("gamma[x]", "requirements.txt:7"),
        ("delta @ https://example.org/delta-1.0-py3-none-any.whl#sha256=" + "a" * 64, "requirements.txt:8"),
    ]


def test_option_spellings_normalise(tmp_path: Path) -> None:
    body = (
        "-i https://a.example/simple\n--extra-index-url=https://b.example/simple\n-fhttps://c.example/links\n"
    )
    body += "--no-index\n--require-hashes\n--use-feature=truststore\n--find-links HTTPS://e.example/w\n"
    body += "--extra-index https://d.example/simple\n--pref\n"
    texts = [line.text for line in _lines(tmp_path, body)]
    assert texts == [
        "--index-url https://a.example/simple",
        "--extra-index-url https://b.example/simple",
        "--find-links https://c.example/links",
        "--no-index",
        "--require-hashes",
        "--use-feature truststore",
        "--find-links HTTPS://e.example/w",
        "--extra-index-url https://d.example/simple",
        "--prefer-binary",
    ]


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("-e .\n", "editable"),
        ("--editable git+https://github.com/a/b.git#egg=b\n", "editable"),
        ("foo==${VERSION}\n", "${VAR}"),
        ("--extra-index-url https://${PIP_TOKEN}@pkgs.example/simple\n", "${VAR}"),
        ("--extra-index-url https://user:s3cret@pkgs.example/simple\n", "credentials"),
        ("foo @ https://ghp_abc@github.com/a/foo.whl\n", "credentials"),
        ("x @ https://b.example/x-1.0-py3-none-any.whl?X-Amz-Signature=abc&X-Amz-Credential=k\n", "secret"),
        ("--extra-index-url https://pkgs.example/simple?token=abc\n", "secret"),
        ("x @ https://h.example/ghp_abcdefghijklmnopqrstuvwxyz0123456789/x-1.0.tar.gz\n", "access token"),
        ("./local/pkg\n", "local path"),
        ("/abs/pkg-1.0-py3-none-any.whl\n", "local path"),
        ("foo @ file:///tmp/foo.whl\n", "local path"),
        ("--find-links ./wheels\n", "build context"),
        ("-f /home/me/wheels\n", "build context"),
        ("--find-links file:///home/me/wheels\n", "build context"),
        ("--frobnicate\n", "unknown option"),
        ("--no\n", "unknown option"),  # ambiguous prefix: --no-index, --no-binary
        ("foo==1.0 --install-option=--x\n", "not supported"),
        ("foo==1.0 --hash=md5:abc\n", "ALGO:HEX"),
        ("foo==1.0 --hash=sha256:abc\n", "ALGO:HEX"),
        ("foo===\n", "PEP 508"),
        ("-r https://example.org/reqs.txt\n", "hashed"),
        ("-r ../outside.txt\n", "'..'"),
        ("-r /etc/passwd\n", "absolute"),
        ("-r missing.txt\n", "does not exist"),
        ("-c ~/c.txt\n", "home directory"),
        ("--index-url\n", "needs a value"),
        ("--pre=yes\n", "takes no value"),
        ("--trusted-host bad host!\n", "host"),
        ("foo @ ftp://example.org/foo.whl\n", "scheme"),
        ("https://example.org/download?id=3\n", "project name"),
    ],
)
def test_rejected_lines_name_file_line_and_reason(tmp_path: Path, body: str, needle: str) -> None:
    errors = _errors(tmp_path, "ok-package==1.0\n" + body)
    assert len(errors) == 1, errors
    assert "requirements.txt: python.requirements[0] line 2: " in errors[0]
    assert needle in errors[0]


def test_include_cycle_is_reported_with_chain(tmp_path: Path) -> None:
    errors = _errors(tmp_path, "-r a.txt\n", {"a.txt": "x==1\n-r b.txt\n", "b.txt": "-r a.txt\n"})
    assert len(errors) == 1
    assert "include cycle: requirements.txt -> a.txt -> b.txt -> a.txt" in errors[0]
    assert errors[0].startswith(f"{tmp_path}/b.txt: python.requirements[0] line 1: ")


def test_include_symlink_escaping_folder_is_rejected(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("evil==1\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "link.txt").symlink_to(outside)
    errors = _errors(project, "-r link.txt\n")
    assert "outside the profile's folder" in errors[0]


def test_all_bad_lines_reported_together(tmp_path: Path) -> None:
    errors = _errors(tmp_path, "-e .\ngood==1\nfoo==${X}\n--bogus\n")
    assert [e.split(": ")[1] for e in errors] == [
        "python.requirements[0] line 1",
        "python.requirements[0] line 3",
        "python.requirements[0] line 4",
    ]


def test_not_utf8_is_an_issue_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_bytes(b"caf\xe9==1\n")
    (tmp_path / "p.toml").write_text(
        'name = "p"\nkind = "custom"\n[python]\nrequirements = ["requirements.txt"]\n'
    )
    with pytest.raises(ProfileError, match="not UTF-8"):
        load_profile(str(tmp_path / "p.toml"))


def test_packages_get_profile_origins(tmp_path: Path) -> None:
    (tmp_path / "p.toml").write_text(
        'name = "p"\nkind = "custom"\n[python]\npackages = ["NumPy==2.2.6", "six @ https://x.example/six-1.17.0-py3-none-any.whl"]\n'
    )
    lines = load_profile(str(tmp_path / "p.toml")).python.lines
    assert [(line.name, line.origin) for line in lines] == [
        ("numpy", "profile:python.packages[0]"),
        ("six", "profile:python.packages[1]"),
    ]


def test_requirement_after_an_option_is_refused_not_dropped(tmp_path: Path) -> None:
    errors = _errors(tmp_path, "--extra-index-url https://pypi.nvidia.com nvidia-dali-cuda120\n")
    assert len(errors) == 1
    assert "'nvidia-dali-cuda120' follows an option" in errors[0]
    assert "own line" in errors[0]


def test_marker_of_a_plain_name_may_hold_a_slash(tmp_path: Path) -> None:
    lines = _lines(tmp_path, 'foo;platform_release=="5.15/x"\n')
    assert [line.text for line in lines] == ['foo; platform_release == "5.15/x"']


@pytest.mark.parametrize(
    ("constraints", "needle"),
    [
        ("foo==${VERSION}\n", "${VAR}"),
        ("foo @ https://user:pw@h.example/foo-1.0.tar.gz\n", "credentials"),
        ("-e .\n", "editable"),
        ("-r other.txt\n", "inside a constraints file"),
        ("-c other.txt\n", "inside a constraints file"),
        ("./local\n", "local path"),
    ],
)
def test_constraints_file_is_checked_like_a_requirements_file(
    tmp_path: Path, constraints: str, needle: str
) -> None:
    errors = _errors(tmp_path, "x==1\n-c c.txt\n", {"c.txt": constraints, "other.txt": "y==1\n"})
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"{tmp_path}/c.txt: python.requirements[0] line 1: ")
    assert needle in errors[0]


def test_constraints_lines_are_not_installed(tmp_path: Path) -> None:
    lines = _lines(tmp_path, "x==1\n-c c.txt\n", {"c.txt": "y==2 --hash=sha256:" + "0" * 64 + "\n"})
    assert [(line.kind, line.text) for line in lines] == [("requirement", "x==1"), ("option", "-c c.txt")]


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"\xff\xfe" + "x==1\n".encode("utf-16-le") + b"\x00\xd8", "not valid utf-16-le"),
        (b"# -*- coding: klingon -*-\nx==1\n", "unknown encoding 'klingon'"),
        (b"caf\xe9==1\n", "not UTF-8 text"),
    ],
)
def test_undecodable_files_are_issues(tmp_path: Path, data: bytes, needle: str) -> None:
    (tmp_path / "requirements.txt").write_bytes(data)
    (tmp_path / "p.toml").write_text(
        'name = "p"\nkind = "custom"\n[python]\nrequirements = ["requirements.txt"]\n'
    )
    with pytest.raises(ProfileError) as info:
        load_profile(str(tmp_path / "p.toml"))
    assert needle in str(info.value)


def test_coding_line_is_honoured_like_pip(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_bytes(b"# -*- coding: latin-1 -*-\nx==1  # caf\xe9\n")
    (tmp_path / "p.toml").write_text(
        'name = "p"\nkind = "custom"\n[python]\nrequirements = ["requirements.txt"]\n'
    )
    assert [line.text for line in load_profile(str(tmp_path / "p.toml")).python.lines] == ["x==1"]
