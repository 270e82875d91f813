"""envbuild.atomic: a file is written whole or not at all, and no temporary file outlives a write.

Real files in a real folder; the failures are real ones (a target that is a non-empty folder, so the
rename is refused; a writer that raises; a folder that does not exist).  Only ``os.fsync`` is replaced,
by a recorder that calls the real one, to see that it is called on the temporary file before the rename.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from envbuild import atomic


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_write_bytes_writes_the_content_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "out.bin"
    atomic.write_bytes(target, b"first")
    atomic.write_bytes(target, b"second, longer")
    assert target.read_bytes() == b"second, longer"
    assert _names(tmp_path) == ["out.bin"]


def test_write_text_encodes_without_newline_translation(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    atomic.write_text(target, "é\r\nline\n")
    assert target.read_bytes() == "é\r\nline\n".encode()
    assert _names(tmp_path) == ["out.txt"]


def test_the_temporary_file_is_hidden_beside_the_target_and_the_target_untouched_until_the_end(
    tmp_path: Path,
) -> None:
    target = tmp_path / "wheel.whl"
    target.write_bytes(b"old")
    with atomic.writing(target) as handle:
        handle.write(b"new")
        (temp,) = atomic.leftovers(target)
        assert temp.parent == tmp_path
        assert temp.name.startswith(".wheel.whl.") and temp.name.endswith(".tmp")
        assert target.read_bytes() == b"old"
    assert target.read_bytes() == b"new"
    assert atomic.leftovers(target) == []
    assert _names(tmp_path) == ["wheel.whl"]


@pytest.mark.parametrize("error", [ValueError("the writer failed"), KeyboardInterrupt()])
def test_a_writer_that_raises_leaves_the_old_content_and_no_temporary_file(
    tmp_path: Path, error: BaseException
) -> None:
    target = tmp_path / "lock.json"
    target.write_text("old", encoding="utf-8")
    with pytest.raises(type(error)) as raised, atomic.writing(target) as handle:
        handle.write(b"half of the new")
        raise error
    assert raised.value is error  # the original error, not one from the cleanup
    assert target.read_text(encoding="utf-8") == "old"
    assert _names(tmp_path) == ["lock.json"]


def test_a_refused_rename_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "SHA256SUMS"
    target.mkdir()
    (target / "inside").write_text("kept", encoding="utf-8")
    with pytest.raises(OSError) as raised:
        atomic.write_text(target, "abc  x.whl\n")
    assert raised.value.errno in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST)
    assert _names(tmp_path) == ["SHA256SUMS"]
    assert (target / "inside").read_text(encoding="utf-8") == "kept"


def test_the_temporary_file_is_fsynced_before_the_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "record.json"
    seen: list[tuple[str, bytes, bool]] = []
    real = os.fsync

    def fsync(fd: int) -> None:  # what the file holds when fsynced, and whether the target exists yet
        name = os.readlink(f"/proc/self/fd/{fd}")
        seen.append((Path(name).name, Path(name).read_bytes(), target.exists()))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    atomic.write_bytes(target, b"durable")
    assert len(seen) == 1
    name, content, target_existed = seen[0]
    assert name.startswith(".record.json.") and name.endswith(".tmp")
    assert content == b"durable" and not target_existed


def test_a_failed_fsync_leaves_the_old_content_and_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "record.json"
    target.write_bytes(b"old")
    failure = OSError(errno.EIO, "Input/output error")

    def fsync(fd: int) -> None:
        raise failure

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError) as raised:
        atomic.write_bytes(target, b"new")
    assert raised.value is failure
    assert target.read_bytes() == b"old"
    assert _names(tmp_path) == ["record.json"]


def test_a_missing_folder_is_the_error_and_nothing_is_created(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        atomic.write_bytes(tmp_path / "absent" / "file", b"x")
    assert _names(tmp_path) == []


def test_mode(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        atomic.write_bytes(tmp_path / "default", b"x")
        atomic.write_bytes(tmp_path / "exact", b"x", mode=0o644)  # exactly, the umask notwithstanding
    finally:
        os.umask(old)
    atomic.write_bytes(tmp_path / "umask", b"x")
    atomic.write_bytes(tmp_path / "private", b"x", mode=0o600)

    def perms(name: str) -> int:
        return stat.S_IMODE((tmp_path / name).stat().st_mode)

    assert perms("default") == 0o600  # as open() would create it under umask 077
    assert perms("exact") == 0o644
    assert perms("umask") == 0o666 & ~old
    assert perms("private") == 0o600


def test_write_many_renames_every_file_in_order(tmp_path: Path) -> None:
    files = {tmp_path / "a": b"1", tmp_path / "b": b"2", tmp_path / "lock": b"3"}
    atomic.write_many(files, mode=0o644)
    assert {p: p.read_bytes() for p in files} == files
    assert _names(tmp_path) == ["a", "b", "lock"]
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o644 for p in files)


def test_write_many_failing_while_writing_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"old a")
    files = {tmp_path / "a": b"new a", tmp_path / "absent" / "b": b"new b"}
    with pytest.raises(FileNotFoundError):
        atomic.write_many(files)
    assert (tmp_path / "a").read_bytes() == b"old a"
    assert _names(tmp_path) == ["a"]


def test_write_many_failing_to_rename_removes_the_temporary_files_left(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "inside").write_bytes(b"kept")
    (tmp_path / "lock").write_bytes(b"old lock")
    files = {tmp_path / "a": b"new a", tmp_path / "b": b"new b", tmp_path / "lock": b"new lock"}
    with pytest.raises(OSError):
        atomic.write_many(files)
    assert (tmp_path / "a").read_bytes() == b"new a"  # renamed before the failure
    assert (tmp_path / "lock").read_bytes() == b"old lock"  # the last one: never reached
    assert _names(tmp_path) == ["a", "b", "lock"]


def test_leftovers_are_only_this_targets_temporary_files(tmp_path: Path) -> None:
    target = tmp_path / "x.whl"
    mine = tmp_path / ".x.whl.0123456789ab.tmp"
    others = [".x.whl.tmp", ".x.whl.0123456789ab.tmp.tmp", ".y.whl.0123456789ab.tmp", "x.whl.part"]
    for name in [mine.name, *others]:
        (tmp_path / name).write_bytes(b"")
    assert atomic.leftovers(target) == [mine]
    assert atomic.leftovers(tmp_path / "absent" / "x.whl") == []
