"""``envbuild fetch`` for real (PyPI is reachable from the host): wheels for the image, not the host."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import parse_wheel_filename

from envbuild.errors import BundleError, LockError
from envbuild.image.fetch import LockFailed, fetch, platform_tags
from envbuild.image.selfwheel import build_self_wheel

TINY = Path(__file__).parent / "data" / "bundles" / "tiny"


def image_tags(python: tuple[int, int], os_id: str) -> set[Tag]:
    platforms = platform_tags(os_id)  # type: ignore[arg-type]
    return set(cpython_tags(python, platforms=platforms)) | set(compatible_tags(python, platforms=platforms))


def test_platform_tags_follow_the_glibc() -> None:
    debian = platform_tags("debian12")
    assert debian[0] == "manylinux_2_36_x86_64"
    assert "manylinux_2_37_x86_64" not in debian
    assert {
        "manylinux_2_28_x86_64",
        "manylinux_2_17_x86_64",
        "manylinux2014_x86_64",
        "manylinux1_x86_64",
    } <= set(debian)
    assert platform_tags("ubuntu24.04")[0] == "manylinux_2_39_x86_64"
    assert platform_tags("ubuntu22.04")[0] == "manylinux_2_35_x86_64"


@pytest.fixture(scope="module")
def fetched(tmp_path_factory: pytest.TempPathFactory) -> Path:
    bundle = tmp_path_factory.mktemp("fetch") / "tiny"
    shutil.copytree(TINY, bundle)
    fetch(bundle)
    return bundle


def test_fetch_fills_wheelhouse_and_tools(fetched: Path) -> None:
    wheels = sorted(p.name for p in (fetched / "wheelhouse").glob("*.whl"))
    assert wheels == ["six-1.17.0-py2.py3-none-any.whl"]
    tools = {parse_wheel_filename(p.name)[0] for p in (fetched / "tools").glob("*.whl")}
    assert {
        "envbuild",
        "docker",
        "jinja2",
        "packaging",
        "pydantic",
        "pydantic-core",
        "rich",
    } <= tools


def test_every_fetched_wheel_installs_on_the_image(fetched: Path) -> None:
    supported = image_tags((3, 11), "debian12")
    for path in [*fetched.glob("wheelhouse/*.whl"), *fetched.glob("tools/*.whl")]:
        tags = parse_wheel_filename(path.name)[3]
        assert tags & supported, f"{path.name} cannot install on cp311 / debian12"
    binary = [p.name for p in fetched.glob("tools/pydantic_core-*.whl")]
    assert binary and "cp311" in binary[0] and "manylinux" in binary[0]


def test_sha256sums_match_the_files(fetched: Path) -> None:
    for folder in ("wheelhouse", "tools"):
        lines = (fetched / folder / "SHA256SUMS").read_text().splitlines()
        names = sorted(p.name for p in (fetched / folder).glob("*.whl"))
        assert [line.split("  ", 1)[1] for line in lines] == names
        for line in lines:
            digest, name = line.split("  ", 1)
            assert hashlib.sha256((fetched / folder / name).read_bytes()).hexdigest() == digest


def test_fetch_into_an_external_wheelhouse(tmp_path: Path) -> None:
    bundle = tmp_path / "tiny"
    shutil.copytree(TINY, bundle)
    house = tmp_path / "house"
    result = fetch(bundle, house, tools=False)
    assert result.wheels == ("six-1.17.0-py2.py3-none-any.whl",)
    assert not list((bundle / "wheelhouse").glob("*.whl")) and not list((bundle / "tools").glob("*.whl"))


def test_fetch_of_an_unresolvable_bundle_names_the_requirement(tmp_path: Path) -> None:
    bundle = tmp_path / "tiny"
    shutil.copytree(TINY, bundle)
    lock = json.loads((bundle / "envbuild.lock.json").read_text())
    lock["declared"][0]["text"] = "six==0.0.0.404"
    (bundle / "envbuild.lock.json").write_text(json.dumps(lock))
    before = (bundle / "requirements-rebuild.txt").read_bytes()
    with pytest.raises(LockFailed, match="E-REQ-CONFLICT") as info:
        fetch(bundle, tools=False)
    assert "six==0.0.0.404" in str(info.value)
    assert (bundle / "requirements-rebuild.txt").read_bytes() == before
    assert not list((bundle / "wheelhouse").glob("*.whl"))


def test_fetch_refuses_a_bad_lock(tmp_path: Path) -> None:
    bundle = tmp_path / "tiny"
    shutil.copytree(TINY, bundle)
    (bundle / "envbuild.lock.json").write_text('{"format": "envbuild.lock/0"}')
    with pytest.raises(LockError, match=r"envbuild\.lock\.json: format"):
        fetch(bundle)
    with pytest.raises(BundleError, match="not a bundle directory"):
        fetch(tmp_path / "absent")


def test_self_wheel_is_deterministic_and_complete(tmp_path: Path) -> None:
    one = build_self_wheel(tmp_path / "a").read_bytes()
    two = build_self_wheel(tmp_path / "b").read_bytes()
    assert one == two
    with zipfile.ZipFile(io.BytesIO(one)) as archive:
        names = set(archive.namelist())
        assert {"envbuild/__init__.py", "envbuild/cli/__init__.py", "envbuild/image/run.py"} <= names
        assert any(n.startswith("envbuild/_data/templates/dockerfiles/") for n in names)
        assert not any("__pycache__" in n for n in names)
        record = archive.read("envbuild-0.1.0.dist-info/RECORD").decode()
        for name, digest, size in csv.reader(record.splitlines()):
            if not digest:
                continue
            data = archive.read(name)
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={expected}" and int(size) == len(data)
        assert (
            "envbuild = envbuild.cli:main"
            in archive.read("envbuild-0.1.0.dist-info/entry_points.txt").decode()
        )


def test_self_wheel_installs_with_pip(tmp_path: Path) -> None:
    wheel = build_self_wheel(tmp_path / "w")
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-index",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    probe = "import envbuild.resources as r; print(r.templates_dir())"
    out = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(target)!r}); {probe}"],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    ).stdout.strip()
    assert out == str(target / "envbuild" / "_data" / "templates")


def test_wheels_follow_the_lock_python_not_the_host(tmp_path: Path) -> None:
    """The host runs 3.11; a lock for Ubuntu 24.04 / Python 3.12 gets cp312 wheels."""
    bundle = tmp_path / "tiny"
    shutil.copytree(TINY, bundle)
    lock = json.loads((bundle / "envbuild.lock.json").read_text())
    lock.update(os="ubuntu24.04", os_release_id="ubuntu", os_release_version="24.04", python_version="3.12")
    (bundle / "envbuild.lock.json").write_text(json.dumps(lock))
    fetch(bundle)
    (core,) = [p.name for p in (bundle / "tools").glob("pydantic_core-*.whl")]
    assert "-cp312-cp312-" in core
    supported = image_tags((3, 12), "ubuntu24.04")
    for path in (bundle / "tools").glob("*.whl"):
        assert parse_wheel_filename(path.name)[3] & supported, path.name


def test_an_uninstalled_checkouts_wheel_declares_what_pyproject_declares() -> None:
    """The fallback METADATA (envbuild run from a checkout that pip never installed) is read from
    pyproject.toml: it names every runtime dependency the installed distribution does (hatchling's
    METADATA, built from the same file), extras aside."""
    import importlib.metadata
    from email.parser import Parser

    from packaging.requirements import Requirement

    from envbuild.image.selfwheel import checkout_metadata

    text = checkout_metadata(Path(__file__).resolve().parent.parent / "pyproject.toml")
    fallback = Parser().parsestr(text)
    installed = importlib.metadata.metadata("envbuild")
    assert (fallback["Name"], fallback["Version"], fallback["Requires-Python"]) == (
        installed["Name"],
        installed["Version"],
        installed["Requires-Python"],
    )
    runtime = [
        r
        for r in map(Requirement, importlib.metadata.requires("envbuild") or [])
        if "extra" not in str(r.marker)
    ]
    assert sorted(map(str, map(Requirement, fallback.get_all("Requires-Dist")))) == sorted(map(str, runtime))


def test_a_checkout_without_a_project_table_is_a_build_error(tmp_path: Path) -> None:
    from envbuild.errors import BuildError
    from envbuild.image.selfwheel import checkout_metadata

    (tmp_path / "pyproject.toml").write_text('[build-system]\nrequires = ["hatchling"]\n')
    with pytest.raises(BuildError, match=r"no usable \[project\] table \(KeyError: 'project'\)"):
        checkout_metadata(tmp_path / "pyproject.toml")
