"""The rebuild proof on a small real image: newer versions upstream change nothing (T2), an edited file
is named with its distribution and both hashes (T4), and SOURCE_DATE_EPOCH is what makes .pyc files
equal (T5).  The pytorch-cpu image's record and its ``rebuild --verify`` from a copy of the bundle in
another folder (T1) are in tests/test_e2e.py; a same-name wheel with other bytes (T3) is in
tests/test_build_wheelhouse.py.

The bundle: a ``custom`` profile on the local Debian 12 base with ``leftpad==1.0`` (-> ``fakedep 1.0``),
locked and fetched against the loopback index of ``index_support`` (wheels written by the tests), then
built by the real engine; apt reads Debian's archive as every image build here does.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from build_support import envbuild, temporary_tag
from conftest import BASE_IMAGE
from index_support import IndexTree, build_index_tree, make_wheel, serve_tree
from lock_support import clean_env

from envbuild.image.refs import slug

# One xdist worker builds the small image and runs every test here (tests/conftest.py).
pytestmark = [pytest.mark.docker, pytest.mark.xdist_group("rebuild-proof")]

SITE = "/opt/venv/lib/python3.11/site-packages"


@dataclass(frozen=True)
class Small:
    bundle: Path
    tag: str
    record: Path
    tree: IndexTree
    env: dict[str, str]


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory, docker_client: Any) -> Iterator[Small]:
    root = tmp_path_factory.mktemp("rebuild-proof")
    tree = build_index_tree(root)
    env = clean_env(root / "uv-cache")
    profile = root / "small.toml"
    profile.write_text(
        'name = "small"\nkind = "custom"\n'
        f'[base]\nos = "debian12"\nimage = "{BASE_IMAGE}"\n'
        '[python]\nversion = "3.11"\npackages = ["leftpad==1.0"]\n'
    )
    bundle = root / "bundle"
    assert envbuild("render", profile, "--out", bundle, env=env).returncode == 0
    with serve_tree(tree) as urls:
        proc = envbuild("fetch", bundle, "--no-tools", "--index-url", urls.main, env=env)
        assert proc.returncode == 0, proc.stderr
    with temporary_tag(docker_client, "small") as tag:
        proc = envbuild("build", bundle, "--tag", tag, "--quiet", env=env)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        record = bundle / f"build-{slug(tag)}.record.json"
        assert record.is_file()
        yield Small(bundle, tag, record, tree, env)


def test_newer_versions_upstream_leave_the_rebuild_unchanged(
    small: Small, tmp_path: Path, docker_client: Any
) -> None:
    """T2: the index and the wheelhouse gain newer fakedep and leftpad; fetch keeps the locked files,
    and a no-cache rebuild from a copy of the bundle elsewhere is equal on content, .pyc files included."""
    lock_before = (small.bundle / "envbuild.lock.json").read_bytes()
    for name in ("fakedep", "leftpad"):
        make_wheel(small.tree.main, name, "9.0")
        make_wheel(small.bundle / "wheelhouse", name, "9.0")
    with serve_tree(small.tree) as urls:
        proc = envbuild("fetch", small.bundle, "--no-tools", "--index-url", urls.main, env=small.env)
        assert proc.returncode == 0, proc.stderr
    assert (small.bundle / "envbuild.lock.json").read_bytes() == lock_before  # nothing re-resolved
    copy = tmp_path / "elsewhere" / "bundle"
    shutil.copytree(small.bundle, copy)
    with temporary_tag(docker_client, "small-rebuild") as tag:
        proc = envbuild(
            "rebuild",
            copy,
            "--tag",
            tag,
            "--against",
            small.record,
            "--verify",
            "--json",
            "-q",
            env=small.env,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        diff = json.loads(proc.stdout)
        assert diff["identical"] is True and diff["counts"] == {"package": 0, "content": 0, "metadata": 0}
        assert docker_client.api.inspect_image(tag)["Id"] != docker_client.api.inspect_image(small.tag)["Id"]
    record = json.loads(small.record.read_text())
    python = record["outputs"]["python"]
    installed = {d["name"]: d["version"] for d in python if d["location"].startswith(SITE)}
    assert installed["fakedep"] == "1.0" and installed["leftpad"] == "1.0"
    assert sum(1 for row in record["manifest"] if row[0].endswith(".pyc")) > 100  # compared, equal


def test_an_edited_file_is_named_with_its_distribution_and_both_hashes(
    small: Small, docker_client: Any
) -> None:
    """T4: `docker commit` after editing one .py file of fakedep."""
    path = f"{SITE}/fakedep/__init__.py"
    original = b'__version__ = "1.0"\n'  # what index_support's make_wheel writes
    edited = original + b"# edited after the build\n"
    container = docker_client.containers.run(
        small.tag, ["bash", "-c", f"printf '# edited after the build\\n' >> {path}"], user="root", detach=True
    )
    try:
        assert container.wait()["StatusCode"] == 0
        with temporary_tag(docker_client, "small-edited") as tag:
            repository, _, label = tag.rpartition(":")
            container.commit(repository=repository, tag=label)
            proc = envbuild("image", "diff", small.record, tag, "--json")
            assert proc.returncode == 1, proc.stderr
            diff = json.loads(proc.stdout)
    finally:
        container.remove(force=True)
    assert diff["packages"] == [] and diff["counts"] == {"package": 0, "content": 1, "metadata": 0}
    (change,) = diff["paths"]
    assert change["path"] == path and change["class"] == "content" and change["what"] == "sha256"
    assert change["owner"].startswith("py:fakedep")
    assert change["before"] == hashlib.sha256(original).hexdigest()
    assert change["after"] == hashlib.sha256(edited).hexdigest()
    # the control: the image as built still equals its own record, so the edit is the only difference
    unedited = envbuild("image", "diff", small.record, small.tag)
    assert unedited.returncode == 0, unedited.stdout + unedited.stderr
    assert unedited.stdout.startswith("identical on content")


def test_without_source_date_epoch_pyc_files_differ(small: Small, docker_client: Any) -> None:
    """T5, the control: two no-cache builds of the same bundle with SOURCE_DATE_EPOCH emptied (so
    py_compile writes timestamp-based .pyc files) differ in .pyc files; with it (the test above and
    test_e2e's rebuild) they do not."""
    tags = []
    with (
        temporary_tag(docker_client, "small-control-a") as a,
        temporary_tag(docker_client, "small-control-b") as b,
    ):
        for tag in (a, b):
            docker_client.images.build(
                path=str(small.bundle), tag=tag, buildargs={"SOURCE_DATE_EPOCH": ""}, nocache=True, rm=True
            )
            tags.append(tag)
        proc = envbuild("image", "diff", a, b, "--json")
    assert proc.returncode == 1, proc.stderr
    diff = json.loads(proc.stdout)
    assert diff["packages"] == []
    pyc = [p for p in diff["paths"] if p["path"].endswith(".pyc")]
    assert len(pyc) > 100 and all(p["class"] == "content" and p["what"] == "sha256" for p in pyc)
    assert [p["path"] for p in diff["paths"] if not p["path"].endswith(".pyc")] == []
