"""``envbuild build`` against the real engine with the tiny bundle (fast: no Python in the image).

Marked ``docker``: a missing engine fails these tests (the ``docker_client`` fixture), never skips.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
from build_support import envbuild, lock_by_hand, make_ca, temporary_tag

from envbuild.image.build import build_image
from envbuild.image.fetch import fetch

pytestmark = pytest.mark.docker
BASE_IMAGE = os.environ.get("ENVBUILD_TEST_BASE_IMAGE", "envbuild/debian:12")
TINY = Path(__file__).parent / "data" / "bundles" / "tiny"


def run_in(client: Any, tag: str, script: str) -> str:
    out = client.containers.run(tag, ["bash", "-c", script], remove=True)
    return str(out.decode())


@pytest.fixture()
def tiny(tmp_path: Path) -> Path:
    bundle = tmp_path / "tiny"
    shutil.copytree(TINY, bundle)
    return lock_by_hand(bundle)  # build refuses an unlocked bundle


def test_build_tiny_with_wheelhouse_and_ca_cert(docker_client: Any, tiny: Path, tmp_path: Path) -> None:
    fetch(tiny, tools=False)
    cert, _ = make_ca(tmp_path, "corp")
    with temporary_tag(docker_client, "tiny") as tag:
        proc = envbuild("build", str(tiny), "--tag", tag, "--base-image", BASE_IMAGE, "--ca-cert", str(cert))
        assert proc.returncode == 0, proc.stderr
        assert f"built {tag}" in proc.stdout
        assert "so the image gets no validator" in proc.stderr  # fetched --no-tools
        assert "wheelhouse holds no wheels" not in proc.stderr
        log = tiny / f"build-{tag.replace('/', '-').replace(':', '-')}.log"
        text = log.read_text()
        assert "Step 7/22 : RUN mkdir -p /opt/venv" in text and "tiny: 1 wheel(s) installed" in text
        assert "Successfully tagged" in text and "extra CA certs: 1 (build stages only)" in text
        seen = run_in(
            docker_client,
            tag,
            "cat /opt/venv/installed.txt; ls -A /usr/local/share/ca-certificates/envbuild | wc -l; id -un; "
            'grep -c \'"format": "envbuild.lock/1"\' /etc/envbuild/envbuild.lock.json; ls /workspace',
        )
        lines = seen.splitlines()
        assert lines[0] == "six-1.17.0-py2.py3-none-any.whl"
        assert lines[1] == "0"  # the CA trusted the build stages only: the final image has none
        assert lines[2] == "envbuild"
        assert lines[3] == "1"
        assert lines[4] == "hello.py"
        assert not list((tiny / "certs").glob("*.crt")), "the CA must not be written into the bundle"

        # Nothing changed: every step after FROM comes from the cache.
        again = build_image(tiny, tag, base_image=BASE_IMAGE, ca_certs=(cert,), progress=False)
        non_from = [s for s in again.steps if not s.instruction.startswith(("FROM", "ARG"))]
        assert non_from and all(s.cached for s in non_from), [s for s in non_from if not s.cached]

        # --keep-ca-cert: the final image trusts the CA too (the builder stage still from the cache).
        kept = envbuild(
            "build",
            str(tiny),
            "--tag",
            tag,
            "--base-image",
            BASE_IMAGE,
            "--ca-cert",
            str(cert),
            "--keep-ca-cert",
        )
        assert kept.returncode == 0, kept.stderr
        listed = run_in(docker_client, tag, "ls /usr/local/share/ca-certificates/envbuild").split()
        assert [n for n in listed if n.startswith("envbuild-corp-") and n.endswith(".crt")], listed


def test_failing_step_is_named_with_its_output(docker_client: Any, tiny: Path) -> None:
    dockerfile = tiny / "Dockerfile"
    dockerfile.write_text(
        dockerfile.read_text().replace(
            ' && echo "tiny: $(wc -l < /opt/venv/installed.txt) wheel(s) installed"',
            ' && echo "tiny: about to fail" && ls /no/such/dir',
        )
    )
    with temporary_tag(docker_client, "tiny-fail") as tag:
        proc = envbuild("build", str(tiny), "--tag", tag, "--base-image", BASE_IMAGE, "-q")
        assert proc.returncode == 1, proc.stderr
        err = proc.stderr
        assert "wheelhouse holds no wheels, so pip inside the build needs the package index" in err
        assert "build failed at step 7/22: RUN mkdir -p /opt/venv" in err
        assert "returned a non-zero code: 2" in err
        assert "  | tiny: about to fail" in err
        assert "  | ls: cannot access '/no/such/dir': No such file or directory" in err
        assert "Traceback" not in err
        assert f"full log: {tiny}/build-" in err
        with pytest.raises(Exception, match="No such image"):
            docker_client.images.get(tag)


def test_missing_base_image_fails_at_from(docker_client: Any, tiny: Path) -> None:
    with temporary_tag(docker_client, "tiny-nobase") as tag:
        proc = envbuild(
            "build", str(tiny), "--tag", tag, "--base-image", f"envbuild/absent:{uuid.uuid4().hex[:8]}"
        )
        assert proc.returncode == 1
        assert "build failed at step 3/22: FROM ${BASE_IMAGE} AS builder" in proc.stderr


def test_validate_image_without_validator_is_a_clear_error(
    docker_client: Any, tiny: Path, tmp_path: Path
) -> None:
    with temporary_tag(docker_client, "tiny-novalidator") as tag:
        build_image(tiny, tag, base_image=BASE_IMAGE, progress=False)
        proc = envbuild("validate", "--image", tag, "--out", str(tmp_path / "runs"))
        assert proc.returncode == 1, proc.stderr
        assert f"--image {tag}: cannot start the validator" in proc.stderr
        assert "the image has no validator at /usr/local/bin/envbuild" in proc.stderr
        assert "Traceback" not in proc.stderr
        assert not docker_client.containers.list(all=True, filters={"ancestor": tag})  # removed
