"""``[system] snapshot``: apt reads the distribution's snapshot archive at one instant.

snapshot.debian.org and snapshot.ubuntu.com cannot be reached from these machines, so the rendering is
tested here, and the rendered sources are given to a real apt in the local Debian 12 image against a
``file:`` mirror this test builds (a real .deb from dpkg-deb, indexes signed with a throw-away gpg key):
``test_apt_installs_from_a_file_mirror_of_the_snapshot``.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from build_support import envbuild
from conftest import BASE_IMAGE
from render_support import hadolint

SNAPSHOT = "20261130T000000Z"


def profile(tmp_path: Path, body: str, name: str = "snap") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(f'name = "{name}"\n{body}')
    return path


def render(tmp_path: Path, body: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "bundle"
    return envbuild("render", profile(tmp_path, body), "--out", out), out


def sources_run(dockerfile: str) -> tuple[str, str]:
    """(APT_SNAPSHOT_MIRROR's default, the shell command of the RUN that writes the sources) of the
    first stage, as rendered."""
    match = re.search(r"^ARG APT_SNAPSHOT_MIRROR=\"([^\"]+)\"\nRUN ((?:.*\\\n)*.*)$", dockerfile, re.M)
    assert match, dockerfile
    return match.group(1), match.group(2)


@pytest.mark.parametrize("value", ["2026-11-30", "20261130T000000", "20261130t000000z", "20261131T000000Z"])
def test_a_snapshot_that_is_not_an_instant_is_refused(tmp_path: Path, value: str) -> None:
    proc, out = render(tmp_path, f'kind = "ubuntu"\n[system]\nsnapshot = "{value}"\n')
    assert proc.returncode == 2 and not out.exists()
    assert f"snap.toml: system.snapshot: '{value}'" in proc.stderr and "YYYYMMDDTHHMMSSZ" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_debian_sources_name_the_three_pockets_at_the_instant(tmp_path: Path) -> None:
    proc, out = render(
        tmp_path, f'kind = "ubuntu"\n[base]\nos = "debian12"\n[system]\nsnapshot = "{SNAPSHOT}"\n'
    )
    assert proc.returncode == 0, proc.stderr
    said = f"I-APT-SNAPSHOT: apt reads Debian 12 (bookworm)'s archive as it was at {SNAPSHOT}"
    assert said in proc.stdout + proc.stderr
    dockerfile = (out / "Dockerfile").read_text()
    default, run = sources_run(dockerfile)
    assert default == "http://snapshot.debian.org/archive"
    mirror = "${APT_SNAPSHOT_MIRROR}"
    assert re.findall(r'"(deb [^"]+)"', run) == [
        f"deb [check-valid-until=no] {mirror}/debian/{SNAPSHOT} bookworm main",
        f"deb [check-valid-until=no] {mirror}/debian/{SNAPSHOT} bookworm-updates main",
        f"deb [check-valid-until=no] {mirror}/debian-security/{SNAPSHOT} bookworm-security main",
    ]
    # every stage that runs apt reads the snapshot (the builder's and the final stage's OS setup)
    assert dockerfile.count("> /etc/apt/sources.list.d/envbuild-snapshot.list") == 2
    assert hadolint(dockerfile) == []
    lock = json.loads((out / "envbuild.lock.json").read_text())
    assert lock["apt_snapshot"] == SNAPSHOT
    assert f"as it was at `{SNAPSHOT}`" in (out / "README.md").read_text()


def test_ubuntu_sources_and_the_live_repositories_named(tmp_path: Path) -> None:
    body = (
        'kind = "pytorch"\n[base]\nos = "ubuntu24.04"\n[accelerator]\nbackend = "cuda"\ntargets = ["h100"]\n'
        f'[system]\nsnapshot = "{SNAPSHOT}"\n'
    )
    proc, out = render(tmp_path, body)
    assert proc.returncode == 0, proc.stderr
    default, run = sources_run((out / "Dockerfile").read_text())
    assert default == "http://snapshot.ubuntu.com"
    assert (
        f'"deb [check-valid-until=no] ${{APT_SNAPSHOT_MIRROR}}/ubuntu/{SNAPSHOT} noble-security main ' in run
    )
    # the CUDA base image's own NVIDIA repository is not in Ubuntu's snapshot: said, not hidden
    text = proc.stdout + proc.stderr
    assert "W-APT-SNAPSHOT-PARTIAL" in text and "NVIDIA's CUDA repository" in text


def test_deadsnakes_stays_live_and_is_named(tmp_path: Path) -> None:
    body = (
        'kind = "ubuntu"\n[base]\nos = "ubuntu24.04"\n[python]\nversion = "3.11"\n'
        f'[system]\nsnapshot = "{SNAPSHOT}"\n'
    )
    proc = envbuild("check", profile(tmp_path, body))
    assert proc.returncode == 0, proc.stderr
    assert "W-APT-SNAPSHOT-PARTIAL" in proc.stdout + proc.stderr
    assert "the deadsnakes PPA (Python 3.11)" in proc.stdout + proc.stderr


def test_a_snapshot_before_the_service_is_refused_with_its_first(tmp_path: Path) -> None:
    body = 'kind = "ubuntu"\n[base]\nos = "ubuntu22.04"\n[system]\nsnapshot = "20220101T000000Z"\n'
    proc = envbuild("check", profile(tmp_path, body))
    assert proc.returncode == 1
    text = proc.stdout + proc.stderr
    assert (
        "E-APT-SNAPSHOT" in text
        and "http://snapshot.ubuntu.com has no snapshot before 20230301T000000Z" in text
    )


def test_without_a_snapshot_nothing_changes(tmp_path: Path) -> None:
    proc, out = render(tmp_path, 'kind = "ubuntu"\n[base]\nos = "debian12"\n')
    assert proc.returncode == 0, proc.stderr
    assert "APT_SNAPSHOT_MIRROR" not in (out / "Dockerfile").read_text()
    assert json.loads((out / "envbuild.lock.json").read_text())["apt_snapshot"] is None


# ---- a real apt against a file: mirror -------------------------------------------------------------

PROBE = "envbuild-snapshot-probe"


def _gpg(home: Path, *args: str, **kw: Any) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["gpg", "--homedir", str(home), "--batch", *args], check=True, capture_output=True, **kw
    )


def _deb(work: Path) -> Path:
    root = work / "pkg"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "usr/share/envbuild-probe").mkdir(parents=True)
    (root / "usr/share/envbuild-probe/hello").write_text("installed from the snapshot mirror\n")
    (root / "DEBIAN/control").write_text(
        f"Package: {PROBE}\nVersion: 1.0-1\nArchitecture: all\n"
        "Maintainer: envbuild tests <t@example.invalid>\nDescription: a package only the test mirror has\n"
    )
    deb = work / f"{PROBE}_1.0-1_all.deb"
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "--build", str(root), str(deb)], check=True, capture_output=True
    )
    return deb


def _suite(dists: Path, suite: str, packages: bytes, gnupg: Path) -> None:
    """dists/SUITE with main/binary-amd64/Packages(.gz) and a Release signed inline (InRelease)."""
    binary = dists / suite / "main" / "binary-amd64"
    binary.mkdir(parents=True)
    (binary / "Packages").write_bytes(packages)
    (binary / "Packages.gz").write_bytes(gzip.compress(packages, mtime=0))
    lines = []
    for name in ("main/binary-amd64/Packages", "main/binary-amd64/Packages.gz"):
        data = (dists / suite / name).read_bytes()
        lines.append(f" {hashlib.sha256(data).hexdigest()} {len(data)} {name}")
    release = (
        f"Origin: envbuild-test\nSuite: {suite}\nCodename: {suite}\nDate: Mon, 30 Nov 2026 00:00:00 UTC\n"
        "Architectures: amd64 all\nComponents: main\nSHA256:\n" + "\n".join(lines) + "\n"
    )
    (dists / suite / "Release").write_text(release)
    _gpg(gnupg, "--clearsign", "-o", str(dists / suite / "InRelease"), str(dists / suite / "Release"))


def _mirror(work: Path) -> tuple[Path, Path]:
    """A file: mirror laid out as the snapshot service is (ARCHIVE/INSTANT/dists/SUITE), and the
    public key that signs it."""
    gnupg = work / "gnupg"
    gnupg.mkdir(mode=0o700)
    _gpg(
        gnupg,
        "--passphrase",
        "",
        "--quick-gen-key",
        "envbuild test mirror <t@example.invalid>",
        "ed25519",
        "sign",
        "1d",
    )
    key = work / "envbuild-test-mirror.gpg"
    key.write_bytes(_gpg(gnupg, "--export").stdout)
    mirror = work / "mirror"
    deb = _deb(work)
    pool = mirror / "debian" / SNAPSHOT / "pool/main/e" / PROBE
    pool.mkdir(parents=True)
    shutil.copy(deb, pool / deb.name)
    data = deb.read_bytes()
    control = subprocess.run(["dpkg-deb", "-f", str(deb)], check=True, capture_output=True).stdout.decode()
    stanza = (
        control.rstrip("\n")
        + f"\nFilename: pool/main/e/{PROBE}/{deb.name}\nSize: {len(data)}\n"
        + f"SHA256: {hashlib.sha256(data).hexdigest()}\n"
    ).encode()
    _suite(mirror / "debian" / SNAPSHOT / "dists", "bookworm", stanza, gnupg)
    _suite(mirror / "debian" / SNAPSHOT / "dists", "bookworm-updates", b"", gnupg)
    _suite(mirror / "debian-security" / SNAPSHOT / "dists", "bookworm-security", b"", gnupg)
    subprocess.run(["gpgconf", "--homedir", str(gnupg), "--kill", "gpg-agent"], check=False)  # signing done
    return mirror, key


@pytest.mark.docker
def test_apt_installs_from_a_file_mirror_of_the_snapshot(tmp_path: Path, docker_client: Any) -> None:
    if shutil.which("gpg") is None or shutil.which("dpkg-deb") is None:
        pytest.fail(
            "gpg and dpkg-deb are needed to build the test mirror (scripts/test.sh runs on Debian/Ubuntu)"
        )
    proc, out = render(
        tmp_path, f'kind = "ubuntu"\n[base]\nos = "debian12"\n[system]\nsnapshot = "{SNAPSHOT}"\n'
    )
    assert proc.returncode == 0, proc.stderr
    _, run = sources_run((out / "Dockerfile").read_text())
    mirror, key = _mirror(tmp_path)
    os.chmod(tmp_path, 0o755)

    def apt(mirror_url: str) -> tuple[int, str]:
        script = (
            # the mirror's key (the service's is Debian's own, already in the image)
            "cp /test/envbuild-test-mirror.gpg /etc/apt/trusted.gpg.d/ && "
            + run.replace("\\\n", " ")  # the rendered RUN line, as the builder's shell runs it
            + f" && apt-get update && apt-get install -y --no-install-recommends {PROBE}=1.0-1"
            + f" && cat /usr/share/envbuild-probe/hello && dpkg-query -W {PROBE}"
        )
        output = docker_client.containers.run(  # type: ignore[attr-defined]
            BASE_IMAGE,
            ["bash", "-o", "pipefail", "-c", f"{script} 2>&1; echo rc=$?"],
            environment={"APT_SNAPSHOT_MIRROR": mirror_url},
            volumes={
                str(mirror): {"bind": "/mirror", "mode": "ro"},
                str(key): {"bind": "/test/envbuild-test-mirror.gpg", "mode": "ro"},
            },
            network_disabled=True,
            remove=True,
        ).decode()
        rc = int(output.rstrip().rsplit("rc=", 1)[1])
        return rc, output

    rc, output = apt("file:/mirror")
    assert rc == 0, output
    assert "installed from the snapshot mirror" in output and f"{PROBE}\t1.0-1" in output
    # apt read only the snapshot's sources (the base image's deb.debian.org line is gone: no network here)
    assert "deb.debian.org" not in output
    # the instant is part of every URL: a mirror without that instant gives apt nothing to read
    (mirror / "debian" / SNAPSHOT).rename(mirror / "debian" / "20261201T000000Z")
    rc, output = apt("file:/mirror")
    assert rc != 0 and f"file:/mirror/debian/{SNAPSHOT} bookworm" in output, output
