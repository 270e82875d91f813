"""E-SOURCE-NEEDS-TORCH's advice (issue 27): for flash-attn, the wheel its own GitHub release builds for
the lock's torch, CUDA major, Python and C++ ABI (abi.toml's ``[[flash_attn]]`` rows), or what the
release builds when it builds none for them; for any other package, the generic advice.

``source_only_finding`` is called directly, with the inputs ``envbuild lock`` gives it: the lock of a
bundle rendered by the CLI (as tests/test_lock.py renders them) and the sdist read from a loopback
index (tests/index_support.py), so the "its build imports torch" evidence is real.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from index_support import FLASHLIKE_SETUP, IndexTree, IndexURLs, build_index_tree, make_sdist, serve_tree
from lock_support import envbuild

from envbuild.lock.resolve import source_only_finding, sources_for
from envbuild.lock.target import Target
from envbuild.models import Finding, Lock
from envbuild.models.lock import read_lock
from envbuild.plan.abi_data import load_abi_data

RELEASES = "https://github.com/Dao-AILab/flash-attention/releases/download/"

# Hand-written for this test: flash-attn's sdist reduced to what the lock reads from it, a setup.py
# that imports torch first (as flash-attn 2.8.3's does) and its PKG-INFO.
FLASH_ATTN_SETUP = FLASHLIKE_SETUP.replace("flashlike", "flash_attn").replace(
    'install_requires=["torchlike"]', 'install_requires=["torch"]'
)


@pytest.fixture(scope="module")
def urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexURLs]:
    """The standard universe (flashlike among it) and a flash-attn 2.8.3 sdist on its main index."""
    tree: IndexTree = build_index_tree(tmp_path_factory.mktemp("universe"))
    make_sdist(tree.main, "flash-attn", "2.8.3", setup_py=FLASH_ATTN_SETUP, requires=["torch"])
    with serve_tree(tree) as served:
        yield served


@pytest.fixture(autouse=True)
def loopback(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The sdist is read in this process: loopback exempt from proxies, as for the subprocesses."""
    for key in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(key, env[key])


def rendered(env: dict[str, str], folder: Path, torch: str, packages: list[str]) -> Lock:
    """The lock of a bundle rendered from a CUDA 12.8 profile (Ubuntu 24.04, Python 3.11)."""
    profile = folder / "profile.toml"
    profile.write_text(
        'name = "advice"\nkind = "custom"\n[base]\nos = "ubuntu24.04"\n'
        '[accelerator]\nbackend = "cuda"\nversion = "12.8"\n'
        f'[python]\nversion = "3.11"\npackages = {json.dumps(packages)}\n[torch]\nversion = "{torch}"\n',
        encoding="utf-8",
    )
    done = envbuild(env, "render", profile, "--out", folder / "bundle")
    assert done.returncode == 0, done.stdout + done.stderr
    return read_lock(folder / "bundle" / "envbuild.lock.json")


def finding(lock: Lock, name: str, index: str) -> Finding:
    declared = [line for line in lock.declared if line.name == name]
    sources, _ = sources_for(lock, (index,))
    return source_only_finding(name, declared, Target.of(lock), sources, lock)


def test_flash_attn_names_its_release_wheel_for_the_lock(
    tmp_path: Path, urls: IndexURLs, env: dict[str, str]
) -> None:
    lock = rendered(env, tmp_path, "2.7.1", ["flash-attn==2.8.3"])
    assert (lock.torch_version, lock.torch_variant, lock.python_version) == ("2.7.1", "cu128", "3.11")
    f = finding(lock, "flash-attn", urls.main)
    assert f.code == "E-SOURCE-NEEDS-TORCH" and "\n" not in f.message
    wheel = "v2.8.3/flash_attn-2.8.3+cu12torch2.7cxx11abiTRUE-cp311-cp311-linux_x86_64.whl"
    assert (
        "Either use the wheel its GitHub release builds for torch 2.7.1+cu128 and Python 3.11, as a direct "
        f"URL in place of the requirement (`flash-attn @ {RELEASES}{wheel}`), or build it in the image: "
        'add it to the profile\'s `[python] build_from_source = ["flash-attn"]`'
    ) in f.message
    assert f.message.startswith("flash-attn 2.8.3 (profile:python.packages[0]: flash-attn==2.8.3) ")
    assert "(sdist flash_attn-2.8.3.tar.gz: its setup.py imports torch)" in f.message
    (row,) = [r for r in load_abi_data().flash_attn if r.version == "2.8.3"]
    assert f.source == f"flash-attn 2.8.3: {row.source}"


def test_flash_attn_says_what_its_release_builds_when_none_fits(
    tmp_path: Path, urls: IndexURLs, env: dict[str, str]
) -> None:
    lock = rendered(env, tmp_path, "2.9.1", ["flash-attn==2.8.3"])
    f = finding(lock, "flash-attn", urls.main)
    assert f.code == "E-SOURCE-NEEDS-TORCH" and "\n" not in f.message
    assert f.message.endswith(
        "Either build it in the image: add it to the profile's `[python] build_from_source = "
        '["flash-attn"]` (envbuild locks its sdist and build dependencies with their hashes and builds it '
        "in the builder stage after the locked torch, for the ordered cards' archs only), or pick a torch "
        "and Python its GitHub release builds wheels for: it builds none for torch 2.9.1+cu128 and Python "
        "3.11 (it builds torch 2.4, 2.5, 2.6, 2.7, 2.8 with CUDA 12, Python 3.9 to 3.13)"
    )
    assert "https://" not in f.message
    assert f.source is not None and f.source.startswith("flash-attn 2.8.3: Dao-AILab/flash-attention v2.8.3")


def test_another_package_gets_the_generic_advice(
    tmp_path: Path, urls: IndexURLs, env: dict[str, str]
) -> None:
    lock = rendered(env, tmp_path, "2.7.1", ["flashlike==2.8.3"])
    f = finding(lock, "flashlike", urls.main)
    assert f.code == "E-SOURCE-NEEDS-TORCH" and f.source is None
    assert f.message.endswith(
        "Either build it in the image: add it to the profile's `[python] build_from_source = "
        '["flashlike"]` (envbuild locks its sdist and build dependencies with their hashes and builds it '
        "in the builder stage after the locked torch, for the ordered cards' archs only), or use a prebuilt "
        "wheel for this torch/CUDA/Python triple as a direct URL (`flashlike @ https://.../<wheel built for "
        "the torch release, its variant and cp311>.whl`)"
    )
    assert "GitHub release" not in f.message
