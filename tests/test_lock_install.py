"""A locked bundle installs anywhere, and only hash-checked: the provider route on a clean pip.

Real uv, real pip (``PIP_CONFIG_FILE=/dev/null``: no pip configuration of this machine), real venvs,
indexes served on loopback by tests/index_support.py (the standard universe: fakedep on ``main``,
torchlike 2.13.0+cpu on ``cpu``), nothing beyond 127.0.0.1.

- the index route: every locked file is on an index; the README's own command installs it;
- the wheelhouse route: a lock that took torchlike from a local ``--find-links`` folder records it by
  name and sha256 only; a clean pip cannot find it on the indexes, ``envbuild fetch --find-links DIR``
  (any folder with the same file) puts it in the wheelhouse, and the README's command installs offline;
- credentials in an index URL are written as ``${VAR}`` references and expanded by pip and fetch
  against an index that requires HTTP basic authentication;
- build refuses, before any engine, a bundle whose locked files could not be installed offline;
- the validator's own dependencies (``tools/``) are locked with uv, pinned with their sha256 and
  installed by pip with ``--require-hashes --no-deps --no-index``.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from index_support import (
    IndexTree,
    IndexURLs,
    build_index_tree,
    make_wheel,
    serve_index,
    sha256_of,
    tamper,
)
from lock_support import envbuild, read_lock, render

from envbuild.lock.urls import lock_url
from envbuild.render.readme import ROUTE_BEGIN, ROUTE_END

REQUIREMENTS = "requirements-rebuild.txt"
NO_ENGINE = {"DOCKER_HOST": "unix:///nonexistent/docker.sock"}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> IndexTree:
    return build_index_tree(tmp_path_factory.mktemp("universe"), with_setuptools=False)


def route_command(bundle: Path, *, with_pip: bool) -> str:
    """The README's provider-route command that installs the environment (continuation lines joined).

    ``with_pip``: as written (a venv with its own pip); else the same pip arguments, run by this
    Python's pip against a venv made ``--without-pip`` (seconds faster)."""
    readme = (bundle / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index(ROUTE_BEGIN) : readme.index(ROUTE_END)]
    script = section.split("```sh\n", 1)[1].split("```", 1)[0].replace("\\\n", "")
    (command,) = [
        line for line in script.splitlines() if "requirements-rebuild.txt" in line and line[:1] != "#"
    ]
    make, install = command.split(" && ", 1)
    assert re.fullmatch(r"python3\.\d+ -m venv venv", make), make
    assert install.startswith("venv/bin/pip install "), install
    if with_pip:
        return f"{sys.executable} -m venv venv && {install}"
    pip = f"{sys.executable} -m pip --python venv/bin/python"
    return f"{sys.executable} -m venv --without-pip venv && {pip} {install.removeprefix('venv/bin/pip ')}"


def run_route(
    bundle: Path, env: dict[str, str], *, with_pip: bool = False
) -> subprocess.CompletedProcess[str]:
    shutil.rmtree(bundle / "venv", ignore_errors=True)
    return subprocess.run(
        ["bash", "-c", route_command(bundle, with_pip=with_pip)],
        cwd=bundle,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def installed(bundle: Path) -> str:
    return subprocess.run(
        [str(bundle / "venv" / "bin" / "python"), "-c", "import torchlike; print(torchlike.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


# ---------------------------------------------------------------- the index route


def test_index_route_installs_on_a_clean_pip(tmp_path: Path, urls: IndexURLs, env: dict[str, str]) -> None:
    bundle = render(env, tmp_path, "indexroute", ["torchlike==2.13.0+cpu"])
    readme = (bundle / "README.md").read_text(encoding="utf-8")
    assert "This bundle is not locked yet. `envbuild lock .` pins every distribution" in readme
    done = envbuild(env, "lock", bundle, "--index-url", urls.main, "--index-url", urls.cpu)
    assert done.returncode == 0, done.stderr
    text = (bundle / REQUIREMENTS).read_text(encoding="utf-8")
    assert "# Install route: the indexes below hold every locked file;" in text
    readme = (bundle / "README.md").read_text(encoding="utf-8")
    assert "Route: **the indexes**." in readme and "This bundle is not locked yet" not in readme
    proc = run_route(bundle, env, with_pip=True)  # the README's command as written, its venv's own pip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert installed(bundle) == "2.13.0+cpu"


# ---------------------------------------------------------------- the wheelhouse route


def test_wheelhouse_route_installs_offline_after_fetch_find_links(
    tmp_path: Path, tree: IndexTree, urls: IndexURLs, env: dict[str, str]
) -> None:
    bundle = render(env, tmp_path, "wheelroute", ["torchlike==2.13.0+cpu"])
    assert envbuild(env, "lock", bundle, "--index-url", urls.main, "--find-links", tree.cpu).returncode == 0

    # A clean pip from the indexes the file names cannot find torchlike: it is on none of them.
    plain = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "-d",
            str(tmp_path / "dl"),
            "-r",
            REQUIREMENTS,
        ],
        cwd=bundle,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert plain.returncode == 1, plain.stderr  # pip's error status
    assert "No matching distribution found for torchlike==2.13.0+cpu" in plain.stderr

    # fetch without the folder: a usage error that names the flag and the file
    missing = envbuild(env, "fetch", bundle, "--no-tools")
    assert missing.returncode == 2, missing.stdout + missing.stderr
    assert "`envbuild fetch BUNDLE --find-links DIR`" in missing.stderr
    assert "torchlike-2.13.0+cpu-py3-none-any.whl" in missing.stderr and "Traceback" not in missing.stderr

    # any folder holding the same file will do: it is matched by name and sha256, not by path
    elsewhere = tmp_path / "copied-wheels"
    shutil.copytree(tree.cpu, elsewhere)
    fetched = envbuild(env, "fetch", bundle, "--no-tools", "--find-links", elsewhere)
    assert fetched.returncode == 0, fetched.stderr
    wheel = bundle / "wheelhouse" / "torchlike-2.13.0+cpu-py3-none-any.whl"
    assert sha256_of(wheel) == sha256_of(tree.files["torchlike-2.13.0+cpu"])

    readme = (bundle / "README.md").read_text(encoding="utf-8")
    assert "Route: **the wheelhouse**." in readme
    proc = run_route(bundle, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "--no-index --find-links wheelhouse" in route_command(bundle, with_pip=False)
    assert installed(bundle) == "2.13.0+cpu"


def test_fetch_refuses_a_find_links_file_with_other_bytes(
    tmp_path: Path, tree: IndexTree, urls: IndexURLs, env: dict[str, str]
) -> None:
    bundle = render(env, tmp_path, "otherbytes", ["torchlike==2.13.0+cpu"])
    assert envbuild(env, "lock", bundle, "--index-url", urls.main, "--find-links", tree.cpu).returncode == 0
    impostor = tmp_path / "impostor"
    impostor.mkdir()
    name = "torchlike-2.13.0+cpu-py3-none-any.whl"
    shutil.copyfile(tree.files["torchlike-2.13.0+cpu"], impostor / name)
    tamper(impostor / name)
    done = envbuild(env, "fetch", bundle, "--no-tools", "--find-links", impostor)
    assert done.returncode == 2, done.stdout + done.stderr
    assert (
        f"another file by that name: {impostor / name} (sha256 {sha256_of(impostor / name)})" in done.stderr
    )
    assert not (bundle / "wheelhouse" / name).exists()


def test_build_refuses_a_lock_whose_local_files_are_not_fetched(
    tmp_path: Path, tree: IndexTree, urls: IndexURLs, env: dict[str, str]
) -> None:
    bundle = render(env, tmp_path, "unfetched", ["torchlike==2.13.0+cpu"])
    assert envbuild(env, "lock", bundle, "--index-url", urls.main, "--find-links", tree.cpu).returncode == 0
    done = envbuild({**env, **NO_ENGINE}, "build", bundle, "--tag", "x:1")
    assert done.returncode == 2, done.stdout + done.stderr  # 3 would mean the engine was asked first
    assert "came from a local --find-links folder, on no index (torchlike==2.13.0+cpu)" in done.stderr
    assert f"run `envbuild fetch {bundle} --find-links DIR` first" in done.stderr


# ---------------------------------------------------------------- credentials


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://alice:s3cr3t@host/simple/", "https://${P_USER}:${P_TOKEN}@host/simple/"),
        ("https://glpat-abcdefghijklmnopqrst@host/simple/", "https://${P_TOKEN}@host/simple/"),
        ("https://host/simple/?token=abc123&page=2", "https://host/simple/?token=${P_TOKEN}&page=2"),
        ("https://${U}:${T}@host/simple/", "https://${U}:${T}@host/simple/"),
        ("https://host/simple/", "https://host/simple/"),
    ],
    ids=["user-password", "token-as-user", "query-token", "already-references", "none"],
)
def test_lock_url_writes_credentials_as_references(url: str, expected: str) -> None:
    assert lock_url(url, "P") == expected


def test_credentials_are_written_as_variables_and_expanded_by_pip(
    tmp_path: Path, tree: IndexTree, urls: IndexURLs, env: dict[str, str]
) -> None:
    user, token = "alice", "s3cret-Tok3n"
    with serve_index(tree.main, auth=(user, token)) as base:
        private = f"{base.replace('http://', f'http://{user}:{token}@')}/simple/"
        bundle = render(env, tmp_path, "private", ["torchlike==2.13.0+cpu"])
        done = envbuild(env, "lock", bundle, "--index-url", private, "--index-url", urls.cpu)
        assert done.returncode == 0, done.stderr
        files = {p.name: p.read_text(encoding="utf-8") for p in bundle.iterdir() if p.is_file()}
        assert not [name for name, text in files.items() if token in text]  # the token is nowhere
        host = base.removeprefix("http://")
        reference = f"http://${{ENVBUILD_INDEX_1_USER}}:${{ENVBUILD_INDEX_1_TOKEN}}@{host}/simple/"
        lines = files[REQUIREMENTS].splitlines()
        assert f"--index-url {reference}" in lines
        assert (
            "# Credentials are not written here: set ENVBUILD_INDEX_1_USER, ENVBUILD_INDEX_1_TOKEN in the"
            in (files[REQUIREMENTS])
        )
        assert read_lock(bundle)["resolution"]["index_urls"] == [reference, urls.cpu]
        assert "Set `ENVBUILD_INDEX_1_USER`, `ENVBUILD_INDEX_1_TOKEN` first" in files["README.md"]

        refused = run_route(bundle, env)  # the variables unset: pip sends the references, the index says 401
        assert refused.returncode == 1, refused.stdout + refused.stderr  # pip: 401 from the index
        accepted = run_route(bundle, {**env, "ENVBUILD_INDEX_1_USER": user, "ENVBUILD_INDEX_1_TOKEN": token})
        assert accepted.returncode == 0, accepted.stdout + accepted.stderr
        assert installed(bundle) == "2.13.0+cpu"


def test_fetch_fills_the_credentials_from_the_environment(
    tmp_path: Path, tree: IndexTree, urls: IndexURLs, env: dict[str, str]
) -> None:
    user, token = "bob", "0ther-S3cret"
    with serve_index(tree.main, auth=(user, token)) as base:
        private = f"{base.replace('http://', f'http://{user}:{token}@')}/simple/"
        bundle = render(env, tmp_path, "privfetch", ["fakedep==1.1"])
        assert envbuild(env, "lock", bundle, "--index-url", private).returncode == 0
        unset = envbuild(env, "fetch", bundle, "--no-tools")
        assert unset.returncode == 2, unset.stdout + unset.stderr
        assert "set ENVBUILD_INDEX_1_USER, ENVBUILD_INDEX_1_TOKEN in the environment" in unset.stderr
        assert token not in unset.stderr + unset.stdout
        credentials = {"ENVBUILD_INDEX_1_USER": user, "ENVBUILD_INDEX_1_TOKEN": token}
        done = envbuild({**env, **credentials}, "fetch", bundle, "--no-tools")
        assert done.returncode == 0, done.stderr
        wheel = bundle / "wheelhouse" / "fakedep-1.1-py3-none-any.whl"
        assert sha256_of(wheel) == sha256_of(tree.files["fakedep-1.1"])
        assert token not in done.stderr + done.stdout


# ---------------------------------------------------------------- the validator's tools


@pytest.fixture(scope="module")
def tools_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """Stand-ins for envbuild's own dependencies: one wheel per Requires-Dist name, at the lowest version
    its specifier allows (the real ones are on no loopback index)."""
    folder = tmp_path_factory.mktemp("tools-index")
    for requirement in importlib.metadata.requires("envbuild") or []:
        if "extra ==" in requirement:
            continue
        match = re.match(r"([A-Za-z0-9._-]+)\s*>=\s*([0-9.]+)", requirement)
        assert match, requirement
        make_wheel(folder, match.group(1), match.group(2))
    with serve_index(folder) as base:
        yield folder, f"{base}/simple/"


def test_tools_are_locked_hashed_and_installed_with_require_hashes(
    tmp_path: Path, tools_index: tuple[Path, str], env: dict[str, str]
) -> None:
    _, index = tools_index
    bundle = render(env, tmp_path, "tools", ["fakedep==1.0"])
    # the profile's own fakedep comes from a folder; the tools from the index given to fetch
    links = tmp_path / "links"
    links.mkdir()
    make_wheel(links, "fakedep", "1.0")
    assert envbuild(env, "lock", bundle, "--index-url", index, "--find-links", links).returncode == 0
    (bundle / "tools" / "stale-0.1-py3-none-any.whl").write_bytes(b"left by an older fetch")
    done = envbuild(env, "fetch", bundle, "--index-url", index, "--find-links", links)
    assert done.returncode == 0, done.stderr

    text = (bundle / "tools" / "requirements.txt").read_text(encoding="utf-8")
    wheels = {p.name: sha256_of(p) for p in (bundle / "tools").glob("*.whl")}
    (own,) = [name for name in wheels if name.startswith("envbuild-")]
    assert f"envbuild==0.1.0 \\\n    --hash=sha256:{wheels[own]}\n" in text
    expected = {
        re.match(r"([A-Za-z0-9._-]+)", r).group(1).lower()  # type: ignore[union-attr]
        for r in importlib.metadata.requires("envbuild") or []
        if "python_version < '3.11'" not in r and "extra ==" not in r  # the image's Python is 3.11
    }
    pinned = {line.split("==")[0] for line in text.splitlines() if re.match(r"^[a-z0-9].*==", line)}
    assert pinned == expected | {"envbuild"}
    for name, sha in wheels.items():  # exactly the locked files, each with its hash, nothing else
        assert f"--hash=sha256:{sha}" in text, name
    assert len(wheels) == len(pinned) and "stale-0.1-py3-none-any.whl" not in wheels
    sums = (bundle / "tools" / "SHA256SUMS").read_text(encoding="utf-8")
    assert sorted(sums.splitlines()) == sorted(f"{sha}  {name}" for name, sha in wheels.items())

    def install() -> subprocess.CompletedProcess[str]:
        venv = tmp_path / "toolvenv"
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        return subprocess.run(  # the Dockerfile's and the README's command
            [
                *(sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install"),
                *("--no-deps", "--require-hashes", "--no-index", "--find-links", "tools"),
                *("-r", "tools/requirements.txt"),
            ],
            cwd=bundle,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    assert install().returncode == 0
    tamper(next((bundle / "tools").glob("docker-*.whl")))
    refused = install()
    assert refused.returncode == 1, refused.stdout + refused.stderr  # pip's error status
    assert "THESE PACKAGES DO NOT MATCH THE HASHES" in refused.stdout + refused.stderr
    assert json.loads((bundle / "envbuild.lock.json").read_text())["resolved"] is True
