"""``render --apt-from RECORD``: apt packages pinned to the versions a first build recorded.

The records here are written by the test (a :class:`Record` with a hand-made package list); the
record of a real image is exercised by tests/test_e2e.py."""

from __future__ import annotations

import json
from pathlib import Path

from build_support import envbuild

from envbuild.image.record import AptPackage, ImageFiles, Record


def write_record(path: Path, apt: dict[str, str]) -> Path:
    files = ImageFiles(entries={}, apt=[AptPackage(n, v, "amd64") for n, v in apt.items()])
    Record(tag="envbuild-test/x:1", image_id="sha256:" + "0" * 64, diff_ids=[], files=files).write(path)
    return path


RECORDED = {
    "ca-certificates": "20230311+deb12u1",
    "g++": "4:12.2.0-3",
    "ninja-build": "1.11.1-2~deb12u1",
    "python3": "3.11.2-1+b1",
    "python3-dev": "3.11.2-1+b1",
    "python3.11-dev": "3.11.2-6+deb12u8",
}


def test_unpinned_packages_take_the_recorded_versions(tmp_path: Path) -> None:
    record = write_record(tmp_path / "build-x.record.json", RECORDED)
    out = tmp_path / "b"
    profile = tmp_path / "p.toml"  # the toolchain kept in the final image, so the record has it
    profile.write_text(
        'name = "p"\nextends = "pytorch-cpu"\n\n[app]\nsource = "."\n'
        "\n[validate]\ncompile_extensions = true\n"
    )
    proc = envbuild("render", profile, "--apt-from", record, "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert "6 package(s) pinned" in proc.stdout
    # python3.11 is in the final image but not in this record: named, left unpinned
    assert "left unpinned: python3.11" in proc.stderr and "python3.11-venv" not in proc.stderr
    dockerfile = (out / "Dockerfile").read_text()
    assert "      ca-certificates=20230311+deb12u1 \\\n" in dockerfile
    assert "      'ninja-build=1.11.1-2~deb12u1' \\\n" in dockerfile  # quoted for the shell
    assert "      python3.11 \\\n" in dockerfile
    apt = json.loads((out / "envbuild.lock.json").read_text())["apt"]
    assert "g++=4:12.2.0-3" in apt and "python3.11" in apt
    assert f"--apt-from {record}" in dockerfile.split("# Regenerate: ", 1)[1].splitlines()[0]


def test_a_pin_in_the_profile_wins(tmp_path: Path) -> None:
    profile = tmp_path / "p.toml"
    profile.write_text(
        'name = "p"\nextends = "pytorch-cpu"\n\n[app]\nsource = "."\n\n[system]\napt = ["g++=4:12.2.0-9"]\n'
    )
    record = write_record(tmp_path / "r.record.json", RECORDED)
    proc = envbuild("render", profile, "--apt-from", record, "--out", tmp_path / "b")
    assert proc.returncode == 0, proc.stderr
    assert "g++=4:12.2.0-9" in (tmp_path / "b" / "Dockerfile").read_text()


def test_a_version_apt_cannot_take_is_refused_and_nothing_written(tmp_path: Path) -> None:
    record = write_record(tmp_path / "r.record.json", {**RECORDED, "python3": "1.0; rm -rf /"})
    proc = envbuild("render", "pytorch-cpu", "--apt-from", record, "--out", tmp_path / "b")
    assert proc.returncode == 2 and "python3" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "b").exists()
    damaged = tmp_path / "bad.record.json"
    damaged.write_text("{}")
    proc = envbuild("render", "pytorch-cpu", "--apt-from", damaged, "--out", tmp_path / "b")
    assert proc.returncode == 2 and "not a build record" in proc.stderr and not (tmp_path / "b").exists()
