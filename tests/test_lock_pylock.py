"""A PEP 751 ``pylock.toml`` as a profile's requirements input (issue 7, "already-locked input").

The good lock file is written by the real uv (``uv pip compile --format pylock.toml``) against the
loopback index, inside the test; the refused ones are hand-written (and say so).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from index_support import IndexURLs, build_index_tree, serve_tree, sha256_of
from lock_support import clean_env, envbuild

from envbuild.lock.uv import uv_binary


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[IndexURLs, Path]]:
    tree = build_index_tree(tmp_path_factory.mktemp("universe"))
    with serve_tree(tree) as urls:
        yield urls, tree.main


def profile_with(folder: Path, lock_name: str) -> Path:
    path = folder / "profile.toml"
    path.write_text(
        'name = "pylocked"\nkind = "custom"\n[base]\nos = "debian12"\n[python]\nversion = "3.11"\n'
        f'requirements = ["{lock_name}"]\n'
    )
    return path


def test_a_pylock_from_uv_is_kept_and_checked(served: tuple[IndexURLs, Path], tmp_path: Path) -> None:
    urls, main = served
    env = clean_env(tmp_path / "uv-cache")
    (tmp_path / "in.txt").write_text("leftpad==1.0\n")
    subprocess.run(
        [
            *(uv_binary(), "pip", "compile", str(tmp_path / "in.txt"), "--no-config"),
            *("--format", "pylock.toml", "--python-version", "3.11", "--generate-hashes"),
            *("--python-platform", "x86_64-manylinux_2_36", "--index-url", urls.main, "-q"),
            *("-o", str(tmp_path / "pylock.toml")),
        ],
        check=True,
        env=env,
        capture_output=True,
    )
    profile = profile_with(tmp_path, "pylock.toml")
    checked = envbuild(env, "check", profile, "--json")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    codes = {f["code"] for f in json.loads(checked.stdout)["findings"]}
    assert "I-HASH-MODE" in codes
    bundle = tmp_path / "bundle"
    assert envbuild(env, "render", profile, "--out", bundle).returncode == 0
    declared = {d["name"]: d for d in json.loads((bundle / "envbuild.lock.json").read_text())["declared"]}
    assert declared["fakedep"]["text"] == "fakedep==1.0" and declared["fakedep"]["origin"].startswith(
        "pylock.toml:packages["
    )
    assert f"sha256:{sha256_of(main / 'fakedep-1.0-py3-none-any.whl')}" in declared["fakedep"]["hashes"]
    locked = envbuild(env, "lock", bundle, "--index-url", urls.main)
    assert locked.returncode == 0, locked.stderr
    dists = json.loads((bundle / "envbuild.lock.json").read_text())["distributions"]
    assert {d["name"]: d["version"] for d in dists} == {"fakedep": "1.0", "leftpad": "1.0"}


def test_a_pylock_whose_hash_is_not_the_index_file_is_refused(
    served: tuple[IndexURLs, Path], tmp_path: Path
) -> None:
    urls, _ = served
    env = clean_env(tmp_path / "uv-cache")
    # hand-written: a lock whose fakedep hash is of some other file
    (tmp_path / "pylock.dev.toml").write_text(
        'lock-version = "1.0"\ncreated-by = "hand-written test fixture"\n\n[[packages]]\n'
        'name = "fakedep"\nversion = "1.1"\n'
        f'wheels = [{{ name = "fakedep-1.1-py3-none-any.whl", hashes = {{ sha256 = "{"0" * 64}" }} }}]\n'
    )
    bundle = tmp_path / "bundle"
    assert envbuild(env, "render", profile_with(tmp_path, "pylock.dev.toml"), "--out", bundle).returncode == 0
    locked = envbuild(env, "lock", bundle, "--index-url", urls.main)
    assert locked.returncode == 1
    assert (
        "E-REQ-HASH: pylock.dev.toml:packages[0]: fakedep==1.1 allows only 1 sha256 hash(es)" in locked.stdout
    )


def test_an_unreproducible_pylock_package_is_a_profile_error(tmp_path: Path) -> None:
    env = clean_env(tmp_path / "uv-cache")
    # hand-written: a directory source has no version on any index
    (tmp_path / "pylock.toml").write_text(
        'lock-version = "1.0"\n\n[[packages]]\nname = "mine"\ndirectory = { path = "." }\n'
    )
    checked = envbuild(env, "check", profile_with(tmp_path, "pylock.toml"))
    assert checked.returncode == 2
    assert "python.requirements[0] packages[0]: mine: a directory source without a version" in checked.stderr
    assert "Traceback" not in checked.stderr
