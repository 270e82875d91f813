"""Shared fixtures.  Docker tests never skip: a missing engine is a failure (CI starts one).

The suite runs in parallel (``scripts/test.sh``: pytest-xdist, ``-n 2 --dist loadgroup``).  Tests that
share an image built by a module- or session-scoped fixture carry ``@pytest.mark.xdist_group(NAME)``, so
one worker builds it once and runs them all while the other runs the rest; collection fails for a
``docker`` test that uses such a fixture of its own module without a group.  Session fixtures are per
worker: one that both workers need (``locked_pytorch_cpu``) is made once per run under a file lock
(:func:`once_per_run`).  ``pytest -n 0`` runs everything serially in one process.
"""

from __future__ import annotations

import os
import shutil
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from build_support import Built, Rebuilt
from index_support import IndexTree, IndexURLs, build_index_tree, serve_tree
from lock_support import clean_env
from torch_universe import UniverseURLs, build_universe, serve_universe

REPO = Path(__file__).resolve().parent.parent
BASE_IMAGE = os.environ.get("ENVBUILD_TEST_BASE_IMAGE", "envbuild/debian:12")
PYTORCH_CPU_PROFILE = "pytorch-cpu-addop"  # the shared image's profile (the fixture ``pytorch_cpu``)

# The xdist groups that build an image, longest first: under xdist they are handed out before every
# other test (scripts/test.sh passes --no-loadscope-reorder), so the longest chain starts at once.
# cuda-image (tests/test_e2e_cuda.py: a 6 GB CUDA image, 20-25 min on 2 CPUs) takes one worker alone: its five
# tests keep xdist from handing that worker a second group at the start.
IMAGE_GROUPS = ("cuda-image", "pytorch-cpu", "blender-cpu", "container-box", "rebuild-proof")


@pytest.hookimpl(trylast=True)  # after xdist's own hook, which names the groups in the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Check that image-sharing docker tests are grouped, and (in an xdist worker) put the image groups
    first, then the other docker and slow tests, then the rest; the order within each stays the same."""
    ungrouped = sorted(
        f"{item.nodeid}: uses {name!r} ({scope}-scoped, from its module) without an xdist_group"
        for item in items
        if "docker_client" in item.fixturenames and not item.get_closest_marker("xdist_group")
        for name, scope in _own_shared_fixtures(item)
    )
    if ungrouped:
        raise pytest.UsageError(
            "each xdist worker would build its own copy of these images (see tests/conftest.py):\n"
            + "\n".join(ungrouped)
        )
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if getattr(config.option, "loadgroup", False):
        _name_groups_in_node_ids(items)
        split = [i.nodeid for i in items if i.get_closest_marker("xdist_group") and "@" not in i.nodeid]
        if split:  # xdist would hand these out one by one: every worker would build their images
            raise pytest.UsageError(
                f"xdist groups not in the node ids (pytest {pytest.__version__}): {split}"
            )

    def rank(item: pytest.Item) -> tuple[int, int]:
        group = item.get_closest_marker("xdist_group")
        if group is not None:
            name = group.args[0] if group.args else group.kwargs.get("name", "")
            return (0, IMAGE_GROUPS.index(name) if name in IMAGE_GROUPS else len(IMAGE_GROUPS))
        if item.get_closest_marker("docker") or item.get_closest_marker("slow"):
            return (1, 0)
        return (2, 0)

    items.sort(key=rank)


def _name_groups_in_node_ids(items: list[pytest.Item]) -> None:
    """``--dist loadgroup`` sends a group to one worker by the ``@group`` that xdist appends to each
    grouped test's node id in the worker.  Under pytest 9.2, whose node ids are structured, xdist 3.8's
    rename no longer takes and the groups are silently split (pytest-dev/pytest-xdist#1386): append it
    the way pytest 9.2 stores it.  Where xdist's rename took (older pytest, a fixed xdist), nothing."""
    for item in items:
        names = {
            str(m.args[0] if m.args else m.kwargs.get("name", "default"))
            for m in item.iter_markers("xdist_group")
        }
        nodeid = item.nodeid
        if not names or nodeid.rfind("@") > nodeid.rfind("]") or not hasattr(item, "_id"):
            continue
        from _pytest.nodeid import NodeId  # pytest >= 9.2

        item._id = NodeId.parse(f"{nodeid}@{'_'.join(sorted(names))}")


def _own_shared_fixtures(item: pytest.Item) -> list[tuple[str, str]]:
    """The module- or session-scoped fixtures ``item`` uses that its own module defines."""
    module = getattr(getattr(item, "module", None), "__name__", None)
    info = getattr(item, "_fixtureinfo", None)
    if module is None or info is None:
        return []
    return [
        (name, defs[-1].scope)
        for name, defs in info.name2fixturedefs.items()
        if defs
        and defs[-1].scope in ("module", "package", "session")
        and getattr(defs[-1].func, "__module__", None) == module
    ]


def once_per_run(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """``make(folder)`` once per test run, for every xdist worker; the folder it filled.

    Serially the folder lies under the session's base temp; under xdist under the run's (the parent
    of each worker's), and a file lock makes the other workers wait for the first and reuse its
    work.  A failure is recorded, so the others fail at once with its message instead of redoing it.
    """
    from filelock import FileLock

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    folder, done, failed = root / name, root / f"{name}.done", root / f"{name}.failed"
    with FileLock(str(root / f"{name}.lock")):
        if failed.exists():
            pytest.fail(f"{name} (made by another worker) failed:\n{failed.read_text()}", pytrace=False)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            try:
                make(folder)
            except BaseException as exc:
                failed.write_text("".join(traceback.format_exception_only(type(exc), exc)))
                raise
            done.touch()
    return folder


@pytest.fixture(autouse=True)
def _no_user_overlay(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the user's catalog overlay (``envbuild catalog refresh`` writes it under
    $XDG_DATA_HOME/envbuild): every test gets an empty data folder of its own, subprocesses included."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("xdg-data")))


# ---------------------------------------------------------------- loopback indexes for uv (lock, fetch)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> IndexTree:
    """The standard universe of tests/index_support.py, built once per module (a module that needs
    another one overrides ``tree``; ``urls`` then serves that)."""
    return build_index_tree(tmp_path_factory.mktemp("universe"))


@pytest.fixture(scope="module")
def urls(tree: IndexTree) -> Iterator[IndexURLs]:
    """``tree`` served on loopback, one server per index (``urls.main``, ``urls.cpu``, ``urls.cu128``)."""
    with serve_tree(tree) as served:
        yield served


@pytest.fixture(scope="module")
def torch_urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UniverseURLs]:
    """The torch universe of tests/torch_universe.py (torch's recorded dependency graph), served."""
    with serve_universe(build_universe(tmp_path_factory.mktemp("torch-universe"))) as served:
        yield served


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment for ``envbuild lock``/``fetch`` against those indexes (lock_support.clean_env): one
    uv cache per module, so a module must not change a file it serves (it takes ``no_engine_env``)."""
    return clean_env(tmp_path_factory.mktemp("uv-cache"))


NO_ENGINE = "unix:///nonexistent/envbuild-test-docker.sock"


@pytest.fixture
def no_engine_env(tmp_path: Path) -> dict[str, str]:
    """``env`` with a uv cache of the test's own (it may change a served file) and ``DOCKER_HOST`` at a
    socket that does not exist: exit 3 (no engine) proves every check before the engine passed."""
    return {**clean_env(tmp_path / "uv-cache"), "DOCKER_HOST": NO_ENGINE}


@pytest.fixture
def fetched(tmp_path: Path, urls: IndexURLs, no_engine_env: dict[str, str]) -> Path:
    """A bundle for leftpad (-> fakedep 1.0), locked against the loopback index and fetched."""
    from wheelhouse_support import run, write_profile

    profile = write_profile(tmp_path, "wh", "leftpad==1.0")
    bundle = tmp_path / "bundle"
    assert run("render", profile, "--out", bundle, env=no_engine_env).returncode == 0
    proc = run("fetch", bundle, "--no-tools", "--index-url", urls.main, env=no_engine_env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("locked the bundle, then fetched 2 wheel(s)")
    return bundle


@pytest.fixture(scope="session")
def docker_client() -> Iterator[object]:
    import docker

    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:  # any failure to reach the engine fails the test
        pytest.fail(f"Docker engine not reachable ({exc}); run scripts/docker-engine.sh", pytrace=False)
    try:
        client.images.get(BASE_IMAGE)
    except Exception:
        pytest.fail(f"base image {BASE_IMAGE} missing; run scripts/base-image.sh", pytrace=False)
    yield client
    client.close()


# The PyTorch index is unreachable from these machines: PyPI plus the CPU torch file on disk stand in
# (the lock records both as its provenance).
LOCK_SOURCES = ("--index-url", "https://pypi.org/simple", "--find-links", "/opt/wheels")


@pytest.fixture(scope="session")
def locked_pytorch_cpu(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built-in ``pytorch-cpu`` bundle, rendered, locked and fetched once per test run (shared by the
    xdist workers: add files to it, change none)."""
    from build_support import envbuild

    def make(folder: Path) -> None:
        bundle = folder / "pytorch-cpu"
        for args in (
            ("render", "pytorch-cpu", "--out", bundle),
            ("lock", bundle, *LOCK_SOURCES),
            ("fetch", bundle, "--find-links", "/opt/wheels"),  # torch: from that folder, by name and sha256
        ):
            proc = envbuild(*args)
            assert proc.returncode == 0, f"envbuild {args[0]} exited {proc.returncode}:\n{proc.stderr}"

    return once_per_run(tmp_path_factory, "locked-pytorch-cpu", make) / "pytorch-cpu"


@pytest.fixture(scope="session")
def pytorch_cpu(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    """The shared pytorch-cpu image (xdist group ``pytorch-cpu``, one worker builds it once): the built-in
    ``pytorch-cpu`` profile plus ``eb-addop`` built from source in the builder stage (tests/addop_support.py),
    rendered, locked against PyPI, /opt/wheels and a loopback index serving the sdist, fetched, and built in
    hash mode on the local Debian 12 base.  The tests of the default profile (tests/test_e2e.py) and of a
    source build (tests/test_source_build.py) share it: two torch images would cost a second venv install
    and final-stage copy (about 4 minutes on 2 loaded CPUs)."""
    from addop_support import make_addop, write_profile
    from build_support import ok, temporary_tag
    from index_support import serve_index

    work = tmp_path_factory.mktemp("pytorch-cpu")
    make_addop(work / "index")
    bundle = work / "pytorch-cpu"
    profile = write_profile(work / "profile", ["eb-addop"], name=PYTORCH_CPU_PROFILE, probe_ops=True)
    with serve_index(work / "index") as served:  # until fetch has taken the sdist
        ok("render", profile, "--out", bundle)
        ok("lock", bundle, *LOCK_SOURCES, "--index-url", f"{served}/simple/")
        ok("fetch", bundle, "--find-links", "/opt/wheels")  # torch: from that folder, by name and sha256
    with temporary_tag(docker_client, "pytorch-cpu") as tag:
        ok("build", bundle, "--tag", tag, "--base-image", BASE_IMAGE, "--quiet")
        yield Built(tag, bundle)


@pytest.fixture(scope="session")
def pytorch_cpu_rebuilt(
    pytorch_cpu: Built, docker_client: Any, tmp_path_factory: pytest.TempPathFactory
) -> Rebuilt:
    """T1: a copy of the pytorch-cpu bundle in another folder (its kept built wheel included), rebuilt
    without the cache by ``envbuild rebuild --verify --json`` against the first build's record.  The image
    is removed once its id is read; the tests judge the output and the log."""
    from build_support import envbuild, temporary_tag

    from envbuild.image.refs import slug

    record = pytorch_cpu.bundle / f"build-{slug(pytorch_cpu.tag)}.record.json"
    copy = tmp_path_factory.mktemp("another") / "folder"
    shutil.copytree(pytorch_cpu.bundle, copy)
    with temporary_tag(docker_client, "pytorch-cpu-rebuild") as tag:
        proc = envbuild("rebuild", copy, "--tag", tag, "--against", record, "--verify", "--json", "-q")
        image_id = docker_client.api.inspect_image(tag)["Id"] if proc.returncode in (0, 1) else ""
        log = copy / f"build-{slug(tag)}.log"
        return Rebuilt(proc, image_id, log.read_text(encoding="utf-8") if log.is_file() else "")
