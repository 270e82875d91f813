"""Faults in the wheelhouse (issue 12, item 5): a truncated wheel, and a disk that fills while fetching.

Real tools as in test_build_wheelhouse (uv locks against the loopback index, fetch downloads from it;
``DOCKER_HOST`` names a socket that does not exist, so a refusal before exit 3 proves the engine was
never contacted).  The full disk is a real one: a small tmpfs mounted for the test (root needed).
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from build_support import fill_up, small_tmpfs, tree_bytes
from index_support import sha256_of
from wheelhouse_support import locked_files, run


def test_a_truncated_wheel_is_named_before_the_engine_and_fetch_repairs_it(
    fetched: Path, no_engine_env: dict[str, str]
) -> None:
    wheel = fetched / "wheelhouse" / "leftpad-1.0-py3-none-any.whl"
    whole = wheel.read_bytes()
    wheel.write_bytes(whole[: len(whole) // 2])  # a copy that stopped half-way: same name, half the bytes
    proc = run("build", fetched, "--tag", "envbuild-test/wh:1", env=no_engine_env)
    assert proc.returncode == 1, proc.stderr
    assert f"leftpad==1.0: {wheel} has sha256 {sha256_of(wheel)}" in proc.stderr
    # this loopback index gives no sizes, so the lock has none: the zip itself is found unreadable
    assert f"(not a readable zip: {len(whole) // 2} bytes, damaged or truncated)" in proc.stderr
    assert f"Run `envbuild fetch {fetched}` again" in proc.stderr
    assert "Traceback" not in proc.stderr and not list(fetched.glob("build-*.log"))

    proc = run("fetch", fetched, "--no-tools", env=no_engine_env)
    assert proc.returncode == 0, proc.stderr
    assert wheel.read_bytes() == whole
    with zipfile.ZipFile(wheel) as archive:
        assert archive.testzip() is None
    assert (
        run("build", fetched, "--tag", "envbuild-test/wh:1", env=no_engine_env).returncode == 3
    )  # only the engine


def test_a_wheel_shorter_than_the_locked_size_is_called_truncated(
    fetched: Path, no_engine_env: dict[str, str]
) -> None:
    """A lock from an index that gives sizes (PyPI does; the sizes are set here by hand, as such an index
    would have): the message says how much of the file is there."""
    lock_file = fetched / "envbuild.lock.json"
    lock = json.loads(lock_file.read_text())
    for dist in lock["distributions"]:
        for file in dist["files"]:
            file["size"] = (fetched / "wheelhouse" / file["filename"]).stat().st_size
    lock_file.write_text(json.dumps(lock, indent=2))
    wheel = fetched / "wheelhouse" / "fakedep-1.0-py3-none-any.whl"
    whole = wheel.read_bytes()
    wheel.write_bytes(whole[:100])
    proc = run("build", fetched, "--tag", "envbuild-test/wh:1", env=no_engine_env)
    assert proc.returncode == 1, proc.stderr
    assert f"fakedep==1.0: {wheel} has sha256 {sha256_of(wheel)}" in proc.stderr
    assert f"(truncated: 100 of {len(whole)} bytes)" in proc.stderr


def test_a_wheel_damaged_inside_is_named_as_such(fetched: Path, no_engine_env: dict[str, str]) -> None:
    """Same size, the first member's CRC in the central directory flipped: the zip's CRC check names it."""
    wheel = fetched / "wheelhouse" / "fakedep-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        info = archive.infolist()[0]
    data = bytearray(wheel.read_bytes())
    central = data.index(b"PK\x01\x02")  # the first central directory entry; its CRC-32 is at +16
    data[central + 16] ^= 0xFF
    wheel.write_bytes(bytes(data))
    proc = run("build", fetched, "--tag", "envbuild-test/wh:1", env=no_engine_env)
    assert proc.returncode == 1, proc.stderr
    assert f"fakedep==1.0: {wheel} has sha256" in proc.stderr
    assert f"(damaged: the zip member {info.filename} fails its CRC check)" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_fetch_into_a_full_disk_names_the_file_and_leaves_nothing_half_written(
    fetched: Path, no_engine_env: dict[str, str], tmp_path: Path
) -> None:
    with small_tmpfs(tmp_path / "disk", 256) as disk:
        house = disk / "house"
        proc = run("fetch", fetched, "--no-tools", "--wheelhouse", house, env=no_engine_env)
        assert proc.returncode == 0, proc.stderr
        (house / "leftpad-1.0-py3-none-any.whl").unlink()
        before = tree_bytes(house)
        filler = fill_up(disk)

        proc = run("fetch", fetched, "--no-tools", "--wheelhouse", house, env=no_engine_env)
        assert proc.returncode == 1, proc.stderr
        target = house / "leftpad-1.0-py3-none-any.whl"
        assert f"fetch: cannot write {target}: No space left on device" in proc.stderr
        assert "run `envbuild fetch` again" in proc.stderr and "Traceback" not in proc.stderr
        assert "must be reachable" not in proc.stderr  # not taken for a network failure
        assert tree_bytes(house) == before  # no temporary file, the fetched wheel and SHA256SUMS as they were

        filler.unlink()  # room again: the same command completes the wheelhouse
        proc = run("fetch", fetched, "--no-tools", "--wheelhouse", house, env=no_engine_env)
        assert proc.returncode == 0, proc.stderr
        assert sha256_of(target) == locked_files(fetched)[target.name]


def test_sha256sums_on_a_full_disk_keeps_the_previous_list(tmp_path: Path) -> None:
    from envbuild.errors import BuildError
    from envbuild.image.fetch import write_sha256sums

    with small_tmpfs(tmp_path / "disk", 64) as disk:
        (disk / "a-1.0-py3-none-any.whl").write_bytes(b"a wheel stand-in, written by hand")
        write_sha256sums(disk)
        before = tree_bytes(disk)
        (disk / "b-1.0-py3-none-any.whl").write_bytes(b"another")
        fill_up(disk)
        with pytest.raises(BuildError) as caught:
            write_sha256sums(disk)
        assert str(caught.value).startswith(f"fetch: cannot write {disk / 'SHA256SUMS'}: No space left")
        left = [p.name for p in disk.iterdir() if "SHA256SUMS" in p.name]
        assert left == ["SHA256SUMS"]  # no temporary file
        assert (disk / "SHA256SUMS").read_bytes() == before["SHA256SUMS"]
