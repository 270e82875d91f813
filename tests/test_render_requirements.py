"""requirements-rebuild.txt: order, provenance, and that pip's own parser reads every line."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.requirements import Requirement
from render_support import cuda_plan, opt, profile, req, result

from envbuild import __version__
from envbuild.errors import BundleError
from envbuild.models import RequirementLine
from envbuild.render import render_bundle, render_dockerfile
from envbuild.render.requirements import render_requirements

COMMAND = "envbuild render train --target h100 --out bundle"


def pip_parse(path: Path, constraint: bool = False) -> list[tuple[str, dict[str, object]]]:
    """Parse with pip's own requirements-file parser (the one `pip install -r` uses)."""
    import warnings

    from pip._internal.network.session import PipSession
    from pip._internal.req.req_file import parse_requirements

    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # pip's vendored pkg_resources
        session = PipSession()
    for parsed in parse_requirements(str(path), session=session):
        if parsed.constraint == constraint:
            out.append((parsed.requirement, dict(parsed.options or {})))
    return out


def test_header_names_version_command_profile_and_indexes() -> None:
    text = render_requirements(cuda_plan(), COMMAND)
    head = text.split("\n\n", 1)[0]
    assert f"envbuild {__version__}" in head
    assert f"#   {COMMAND}" in head
    assert "# profile sha256: " + "0" * 63 + "1" in head
    assert "# index https://download.pytorch.org/whl/cu128: torch 2.7.1 cu128 wheels" in head
    assert "# extra index https://pypi.org/simple: everything else" in head
    assert all(line.startswith("#") for line in head.splitlines())


def test_order_options_then_pins_then_declared_requirements() -> None:
    lines = [
        ln for ln in render_requirements(cuda_plan(), COMMAND).splitlines() if ln and not ln.startswith("#")
    ]
    assert lines == [
        "--index-url https://download.pytorch.org/whl/cu128",
        "--extra-index-url https://pypi.org/simple",
        "--extra-index-url https://example.org/simple",
        "torch==2.7.1+cu128  # torch release 2.7.1, variant cu128",
        "torchvision==0.22.1+cu128  # companion of torch 2.7.1",
        "triton==3.3.1  # required by torch 2.7.1 CUDA wheels",
        "numpy==2.1.3",
        "transformers>=4.40",
        "requests==2.32.3 --hash=sha256:" + "a" * 64,
        'tomli>=2.0; python_version < "3.11"',
    ]


def test_each_requirement_is_preceded_by_its_origin() -> None:
    lines = render_requirements(cuda_plan(), COMMAND).splitlines()
    assert lines[lines.index("numpy==2.1.3") - 1] == "# profile:python.packages[0]"
    assert lines[lines.index('tomli>=2.0; python_version < "3.11"') - 1] == "# requirements.txt:3"


def test_pip_parses_every_line(tmp_path: Path) -> None:
    (tmp_path / "proj" / "reqs").mkdir(parents=True)
    (tmp_path / "proj" / "reqs" / "constraints.txt").write_text("urllib3<3\n")
    plan = cuda_plan(
        profile=profile(folder=str(tmp_path / "proj")),
        requirements=(
            *cuda_plan().requirements,
            req(
                "pkg @ https://example.org/pkg-1.0-py3-none-any.whl#sha256=" + "b" * 64, "r.txt:9", name="pkg"
            ),
            req("extra[cli]~=1.2; sys_platform == 'linux'", "r.txt:10", name="extra"),
            opt("--prefer-binary", "r.txt:11"),
            opt("--index-url https://mirror.example/simple", "r.txt:12"),
            opt("-c constraints.txt", "reqs/r.txt:13"),
        ),
    )
    bundle = render_bundle(result(plan), tmp_path / "bundle", command=COMMAND)
    path = bundle / "requirements-rebuild.txt"
    parsed = pip_parse(path)
    assert pip_parse(path, constraint=True) == [("urllib3<3", {})]
    assert (bundle / "constraints" / "01-constraints.txt").read_text() == "urllib3<3\n"
    assert "COPY constraints/ /tmp/envbuild/constraints/" in (bundle / "Dockerfile").read_text()
    reqs = [r for r, _ in parsed]
    assert reqs[:3] == ["torch==2.7.1+cu128", "torchvision==0.22.1+cu128", "triton==3.3.1"]
    assert "pkg @ https://example.org/pkg-1.0-py3-none-any.whl#sha256=" + "b" * 64 in reqs
    hashed = dict(parsed)["requests==2.32.3"]
    assert hashed["hashes"] == {"sha256": ["a" * 64]}
    for requirement in reqs:
        Requirement(requirement)  # every one is PEP 508
    text = path.read_text()
    # the user's --index-url must not displace the torch index that carries the exact variant
    assert "\n--index-url https://download.pytorch.org/whl/cu128\n" in text
    assert "\n--extra-index-url https://mirror.example/simple\n" in text
    assert [ln for ln in text.splitlines() if ln.startswith("--index-url")] == [
        "--index-url https://download.pytorch.org/whl/cu128"
    ]
    assert (
        "# reqs/r.txt:13: -c constraints.txt (copied into the bundle)\n"
        "--constraint constraints/01-constraints.txt\n" in text
    )
    assert "\n--prefer-binary\n" in text


def test_no_torch_no_pins_section() -> None:
    plan = cuda_plan(pins=(), torch_version=None, torch_variant=None, index_urls=(), requirements=())
    text = render_requirements(plan, COMMAND)
    assert "torch family" not in text and "--index-url" not in text
    assert text.endswith("\n") and not text.endswith("\n\n")


def test_control_characters_are_refused() -> None:
    plan = cuda_plan(requirements=(req("numpy==1.0\n--index-url http://evil", "x:1", name="numpy"),))
    with pytest.raises(BundleError, match="control character"):
        render_requirements(plan, COMMAND)


def test_output_is_deterministic() -> None:
    assert render_requirements(cuda_plan(), COMMAND) == render_requirements(cuda_plan(), COMMAND)


def test_missing_or_escaping_constraints_file_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "proj").mkdir()
    (tmp_path / "outside.txt").write_text("x<1\n")
    for value in ("missing.txt", "../outside.txt"):
        plan = cuda_plan(
            profile=profile(folder=str(tmp_path / "proj")), requirements=(opt(f"-c {value}", "r.txt:1"),)
        )
        with pytest.raises(BundleError, match="constraints file"):
            render_requirements(plan, COMMAND)


def test_no_constraints_no_copy_instruction() -> None:
    assert "constraints/" not in render_dockerfile(cuda_plan())


def test_hash_checking_mode_is_flagged_in_the_header() -> None:
    text = render_requirements(cuda_plan(), COMMAND)
    assert "hash-checking mode" in text.split("\n\n", 1)[0]
    plan = cuda_plan(requirements=(req("numpy==2.1.3", "p:0", name="numpy"),))
    assert "hash-checking" not in render_requirements(plan, COMMAND)


def test_duplicate_index_and_includes_are_comments() -> None:
    plan = cuda_plan(
        requirements=(
            opt("--extra-index-url https://download.pytorch.org/whl/cu128", "r.txt:1"),
            RequirementLine(kind="include", text="-r base.txt", origin="r.txt:2"),
            req("six==1.16.0", "base.txt:1", name="six"),
        )
    )
    text = render_requirements(plan, COMMAND)
    assert (
        "# r.txt:1: --extra-index-url https://download.pytorch.org/whl/cu128 (already listed above)" in text
    )
    assert "# r.txt:2: -r base.txt (expanded: its lines follow in declared order)" in text
    assert [ln for ln in text.splitlines() if "download.pytorch.org" in ln and not ln.startswith("#")] == [
        "--index-url https://download.pytorch.org/whl/cu128"
    ]


PROJECT = Path(__file__).parent / "data" / "profiles" / "project"


@pytest.mark.parametrize("toml", sorted(PROJECT.glob("*.toml")), ids=lambda p: p.stem)
def test_real_world_project_profiles_stay_pip_parsable(toml: Path, tmp_path: Path) -> None:
    """The loader's real-world fixtures (options, markers, URLs, hashes, -r/-c) through render and pip."""
    from envbuild.plan import check
    from envbuild.profile import load_profile

    checked = check(load_profile(str(toml)))
    bundle = render_bundle(checked, tmp_path / "b", command=COMMAND, force=True)
    parsed = [r for r, _ in pip_parse(bundle / "requirements-rebuild.txt")]
    declared = [line for line in checked.plan.requirements if line.kind == "requirement"]
    assert parsed == [pin.spec for pin in checked.plan.pins] + [line.text for line in declared]
    for requirement in parsed:
        Requirement(requirement)
