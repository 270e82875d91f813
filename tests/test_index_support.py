"""index_support against real tools: pip installs its wheels, uv resolves from its loopback indexes."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import tarfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest
from index_support import (
    IndexTree,
    IndexURLs,
    make_sdist,
    make_wheel,
    serve_index,
    sha256_of,
    tamper,
)
from uv import find_uv_bin

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the project's tomli dependency
    import tomli as tomllib

UV = find_uv_bin()


def _clean_env() -> dict[str, str]:
    """The environment without PIP_*/UV_* settings (PIP_FIND_LINKS, a configured index...), without
    pip's config files (a machine-wide pip.conf may add find-links) and with loopback exempt from any
    proxy."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    no_proxy = ",".join(filter(None, [env.get("NO_PROXY", ""), "127.0.0.1", "localhost"]))
    return {
        **env,
        "NO_PROXY": no_proxy,
        "no_proxy": no_proxy,
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }


def uv_compile(tmp: Path, requirements: str, *args: str | Path) -> subprocess.CompletedProcess[str]:
    """``uv pip compile`` of ``requirements`` for CPython 3.11 on x86_64 manylinux_2_36, no user config,
    its own cache."""
    req = tmp / "requirements.in"
    req.write_text(requirements)
    return subprocess.run(
        [
            *(UV, "pip", "compile", "--no-config", "--cache-dir", str(tmp / "uv-cache"), str(req)),
            *("--python-version", "3.11", "--python-platform", "x86_64-manylinux_2_36"),
            *map(str, args),
        ],
        capture_output=True,
        text=True,
        env=_clean_env(),
        timeout=60,
    )


# ---------------------------------------------------------------- wheels and sdists


def test_wheel_installs_with_pip_from_find_links_and_imports(tmp_path: Path, tree: IndexTree) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    python = venv / "bin" / "python"
    install = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "--python", str(python), "install", "--no-input"),
            *("--no-index", "--find-links", str(tree.main), "fakedep==1.1"),
        ],
        capture_output=True,
        text=True,
        env=_clean_env(),
        timeout=120,
    )
    assert install.returncode == 0, install.stderr
    shown = subprocess.run(
        [
            str(python),
            "-c",
            "import fakedep, importlib.metadata as m; print(fakedep.__version__, m.version('fakedep'))",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    assert shown.stdout.split() == ["1.1", "1.1"]


def test_same_arguments_give_the_same_bytes(tmp_path: Path) -> None:
    first, second = (
        make_wheel(
            d, "torchlike", "2.13.0+cpu", requires=["fakedep>=1.0"], files={"torchlike/x.py": "X = 1\n"}
        )
        for d in (tmp_path / "a", tmp_path / "b")
    )
    assert first.name == second.name == "torchlike-2.13.0+cpu-py3-none-any.whl"
    assert sha256_of(first) == sha256_of(second)
    assert sha256_of(make_wheel(tmp_path / "c", "torchlike", "2.13.0+cu128")) != sha256_of(first)

    sdists = [make_sdist(tmp_path / d, "plainsrc", "0.1", requires=["fakedep"]) for d in "ab"]
    assert sdists[0].name == "plainsrc-0.1.tar.gz"
    assert sha256_of(sdists[0]) == sha256_of(sdists[1])


def test_wheel_layout_record_and_names(tmp_path: Path) -> None:
    wheel = make_wheel(
        tmp_path,
        "Foo.Bar-Baz",
        "1.0",
        requires=["fakedep<1.1", "leftpad; python_version < '3.12'"],
        python_tag="cp311",
        abi_tag="cp311",
        platform_tag="manylinux_2_28_x86_64",
        requires_python=">=3.10",
    )
    assert wheel.name == "foo_bar_baz-1.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel) as zf:
        assert zf.testzip() is None
        names = zf.namelist()
        assert names[-1] == "foo_bar_baz-1.0.dist-info/RECORD"
        assert {info.date_time for info in zf.infolist()} == {(1980, 1, 1, 0, 0, 0)}
        assert {info.external_attr >> 16 for info in zf.infolist()} == {0o100644}
        meta = zf.read("foo_bar_baz-1.0.dist-info/METADATA").decode()
        assert "Name: Foo.Bar-Baz\n" in meta and "Requires-Python: >=3.10\n" in meta
        assert "Requires-Dist: leftpad; python_version < '3.12'\n" in meta
        wheel_file = zf.read("foo_bar_baz-1.0.dist-info/WHEEL").decode()
        assert "Root-Is-Purelib: false\n" in wheel_file
        assert "Tag: cp311-cp311-manylinux_2_28_x86_64\n" in wheel_file
        record = zf.read(names[-1]).decode().splitlines()
        assert len(record) == len(names)
        for line in record[:-1]:
            path, digest, size = line.split(",")
            data = zf.read(path)
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert (digest, int(size)) == (f"sha256={expected}", len(data))


def test_sdist_layout(tree: IndexTree) -> None:
    with tarfile.open(tree.files["flashlike-2.8.3"]) as tar:
        names = tar.getnames()
        assert "flashlike-2.8.3/PKG-INFO" in names and "flashlike-2.8.3/setup.py" in names
        setup = tar.extractfile("flashlike-2.8.3/setup.py")
        assert setup is not None and setup.read().startswith(b"import torch")
        assert {m.mtime for m in tar.getmembers()} == {315532800}
    with tarfile.open(tree.files["plainsrc-0.1"]) as tar:
        assert "plainsrc-0.1/pyproject.toml" in tar.getnames()


def test_tampered_wheel_keeps_its_name_and_changes_its_hash(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, "fakedep", "1.1")
    before = sha256_of(wheel)
    tamper(wheel)
    assert wheel.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["fakedep-1.1-py3-none-any.whl"]
    assert sha256_of(wheel) != before
    with zipfile.ZipFile(wheel) as zf:
        assert zf.testzip() is None
        assert b"TAMPERED" in zf.read("fakedep/__init__.py")
        assert "fakedep/_tampered.py" in zf.read("fakedep-1.1.dist-info/RECORD").decode()


# ---------------------------------------------------------------- the index


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as err:
        return err.code, ""


def test_served_index_pages(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, "Some_Pkg", "1.0", requires_python=">=3.10")
    make_sdist(tmp_path, "some-pkg", "1.1")
    with serve_index(tmp_path) as base:
        assert base.startswith("http://127.0.0.1:")
        status, listing = _get(f"{base}/simple/")
        assert status == 200 and 'href="/simple/some-pkg/"' in listing
        status, page = _get(f"{base}/simple/Some_Pkg")  # redirected to the normalised name
        assert status == 200
        assert f'href="/files/{wheel.name}#sha256={sha256_of(wheel)}"' in page
        assert 'data-requires-python="&gt;=3.10"' in page
        assert "some_pkg-1.1.tar.gz#sha256=" in page
        with urllib.request.urlopen(f"{base}/files/{wheel.name}", timeout=10) as response:
            assert response.read() == wheel.read_bytes()
        assert _get(f"{base}/files/{wheel.name}.metadata")[1].startswith("Metadata-Version: 2.1")
        assert _get(f"{base}/simple/nothing/")[0] == 404
        assert _get(f"{base}/files/../{wheel.name}")[0] == 404
    with pytest.raises(OSError):  # shut down and closed
        urllib.request.urlopen(f"{base}/simple/", timeout=2)


def test_uv_locks_the_cpu_variant_from_its_own_index(
    tmp_path: Path, tree: IndexTree, urls: IndexURLs
) -> None:
    lock = tmp_path / "pylock.toml"
    result = uv_compile(
        tmp_path,
        "torchlike==2.13.0+cpu\n",
        *("--index-url", urls.main, "--extra-index-url", urls.cpu),
        *("--format", "pylock.toml", "-o", lock, "--generate-hashes"),
    )
    assert result.returncode == 0, result.stderr
    packages = {p["name"]: p for p in tomllib.loads(lock.read_text())["packages"]}
    assert {name: p["version"] for name, p in packages.items()} == {
        "torchlike": "2.13.0+cpu",
        "fakedep": "1.1",
    }
    for name, key in (("torchlike", "torchlike-2.13.0+cpu"), ("fakedep", "fakedep-1.1")):
        (wheel,) = packages[name]["wheels"]
        assert wheel["url"].endswith("/files/" + tree.files[key].name)
        assert wheel["hashes"]["sha256"] == sha256_of(tree.files[key])
    assert packages["torchlike"]["wheels"][0]["url"].startswith(urls.cpu.removesuffix("simple/"))


def test_uv_reports_the_leftpad_rightpad_conflict(tmp_path: Path, urls: IndexURLs) -> None:
    result = uv_compile(tmp_path, "leftpad\nrightpad\n", "--index-url", urls.main)
    assert result.returncode == 1
    assert "No solution found" in result.stderr
    assert "fakedep<1.1" in result.stderr and "fakedep>=1.1" in result.stderr


def test_sdist_only_distributions(tmp_path: Path, tree: IndexTree, urls: IndexURLs) -> None:
    """plainsrc builds offline (in-tree backend); flashlike's build dies on ``import torch``."""
    plain = uv_compile(tmp_path, "plainsrc\n", "--index-url", urls.main)
    assert plain.returncode == 0, plain.stderr
    assert "plainsrc==0.1" in plain.stdout
    flash = uv_compile(tmp_path, "flashlike\n", "--index-url", urls.main, "--extra-index-url", urls.cpu)
    assert flash.returncode == 1, flash.stderr  # uv: the build failed
    assert "flashlike" in flash.stderr
    if tree.setuptools is not None:
        assert "No module named 'torch'" in flash.stderr
    else:
        assert "setuptools" in flash.stderr
