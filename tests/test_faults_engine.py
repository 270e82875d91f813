"""The Docker engine stops in the middle of a build (issue 12, item 5): exit 3, the tag not moved, and
the build log's last line saying where the build was.

The shared engine serves the whole test session, so it is never stopped: a second, private dockerd
(:class:`build_support.PrivateEngine`: its own data root, exec root, socket and cgroup parent, no bridge)
gets the base image from the shared one, builds the tiny bundle once, then builds it again with a
``RUN ... sleep`` step added, and is killed with SIGKILL while that step runs.  Started again on the same
data root, it shows what the tag names.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from build_support import PrivateEngine, envbuild, fill_up, lock_by_hand, small_tmpfs
from cli_support import ENVBUILD

pytestmark = pytest.mark.docker
BASE_IMAGE = os.environ.get("ENVBUILD_TEST_BASE_IMAGE", "envbuild/debian:12")
TINY = Path(__file__).parent / "data" / "bundles" / "tiny"
TAG = "envbuild-test/engine-stops:1"
SLEEP_STEP = "RUN echo envbuild-fault-sleeping && sleep 300"


@pytest.fixture()
def engine(docker_client: Any) -> Iterator[PrivateEngine]:
    private = PrivateEngine()
    try:
        private.start()
        private.load_from(docker_client, BASE_IMAGE)
        yield private
    finally:
        private.close()


def build(bundle: Path, engine: PrivateEngine, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            *ENVBUILD,
            *("build", str(bundle), "--tag", TAG),
            *("--base-image", BASE_IMAGE, "--network", "none", "--no-record", "-q", *extra),
        ],
        env={**os.environ, "DOCKER_HOST": engine.host},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_an_engine_killed_mid_step_exits_3_names_the_step_and_moves_no_tag(
    engine: PrivateEngine, tmp_path: Path
) -> None:
    bundle = tmp_path / "tiny"
    lock_by_hand(Path(shutil.copytree(TINY, bundle)))
    first = build(bundle, engine)
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    with closing(engine.client()) as client:
        before = client.images.get(TAG).id

    dockerfile = bundle / "Dockerfile"
    text = dockerfile.read_text()
    dockerfile.write_text(text.replace('CMD ["/bin/bash"]', f'{SLEEP_STEP}\nCMD ["/bin/bash"]'))
    log = bundle / "build-envbuild-test-engine-stops-1.log"
    second = build(bundle, engine)
    try:
        deadline = time.monotonic() + 120
        while "\nenvbuild-fault-sleeping\n" not in (log.read_text() if log.exists() else ""):  # its echo
            assert second.poll() is None, second.communicate()
            assert time.monotonic() < deadline, "the sleeping step never started"
            time.sleep(0.2)
        engine.kill()  # mid-step: the RUN container sleeps for 300 s
        stopped_at = time.monotonic()
        _, err = second.communicate(timeout=120)
    finally:
        if second.poll() is None:
            second.kill()
    assert time.monotonic() - stopped_at < 60  # noticed at once, not at the API's one-hour timeout
    assert second.returncode == 3, err
    assert "Traceback" not in err
    steps = [line for line in log.read_text().splitlines() if line.startswith("Step ")]
    number, total = steps[-1].split()[1].split("/")
    where = f"during step {number}/{total}: {SLEEP_STEP}"
    assert f"envbuild: error: the Docker engine at {engine.host} stopped answering {where}" in err
    assert f"{TAG} was not tagged: the engine tags an image only when its build finishes" in err
    assert "; the build stream broke off (" in err and f"full log: {log}" in err
    last = log.read_text().splitlines()[-1]
    assert last.startswith(f"ENGINE STOPPED: the Docker engine stopped answering {where} ("), last

    engine.reap_leftovers()  # the killed engine's shim and the sleeping step's container
    engine.start()  # the same data root: what the engine kept
    with closing(engine.client()) as client:
        assert client.images.get(TAG).id == before  # the tag still names the first build
        tagged = [t for image in client.images.list() for t in image.tags]
        assert sorted(tagged) == sorted([BASE_IMAGE, TAG])  # no half-built image got a name


def test_a_full_disk_for_the_build_log_is_named_and_nothing_is_built(
    docker_client: Any, tmp_path: Path
) -> None:
    """The bundle on a real full filesystem (a small tmpfs): the log cannot be written, so the engine (the
    shared one, only pinged) is never asked to build."""
    with small_tmpfs(tmp_path / "disk", 256) as disk:
        bundle = disk / "tiny"
        lock_by_hand(Path(shutil.copytree(TINY, bundle)))
        fill_up(disk)
        tag = f"envbuild-test/full-disk:{uuid.uuid4().hex[:12]}"
        proc = envbuild("build", bundle, "--tag", tag, "--base-image", BASE_IMAGE, "--no-record", "-q")
        assert proc.returncode == 2, proc.stderr
        log = bundle / f"build-{tag.replace('/', '-').replace(':', '-')}.log"
        assert (
            f"envbuild: error: {log}: cannot write the build log: No space left on device; the engine was "
            in (proc.stderr)
        )
        assert "Traceback" not in proc.stderr
        with pytest.raises(Exception, match="No such image"):
            docker_client.images.get(tag)
