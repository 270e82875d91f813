"""``validate --image`` helpers that need no engine: device flags per backend, report extraction."""

from __future__ import annotations

import io
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from envbuild.errors import BuildError
from envbuild.image.run import device_options, extract_runs
from envbuild.models import read_lock

LOCK = read_lock(Path(__file__).parent / "data" / "bundles" / "tiny" / "envbuild.lock.json")


def archive(entries: list[tuple[str, bytes | None, bytes]]) -> bytes:
    """Entries: (name, data or None for a directory, type)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data, kind in entries:
            info = tarfile.TarInfo(name)
            info.type = kind
            if kind == tarfile.SYMTYPE:
                info.linkname = "/etc/passwd"
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def test_extract_runs_copies_the_run_directory(tmp_path: Path) -> None:
    data = archive(
        [
            ("envbuild-runs", None, tarfile.DIRTYPE),
            ("envbuild-runs/20261129T170000Z-ab12", None, tarfile.DIRTYPE),
            ("envbuild-runs/20261129T170000Z-ab12/report.json", b'{"ok": true}', tarfile.REGTYPE),
            ("envbuild-runs/20261129T170000Z-ab12/raw/env.txt", b"PATH=/x\n", tarfile.REGTYPE),
        ]
    )
    runs = extract_runs(data, tmp_path / "runs")
    assert runs == ((tmp_path / "runs" / "20261129T170000Z-ab12").resolve(),)
    assert (runs[0] / "report.json").read_bytes() == b'{"ok": true}'
    assert (runs[0] / "raw" / "env.txt").read_text() == "PATH=/x\n"


@pytest.mark.parametrize(
    ("name", "kind", "message"),
    [
        ("envbuild-runs/../../escape.txt", tarfile.REGTYPE, "refusing entry"),
        ("/etc/cron.d/evil", tarfile.REGTYPE, "refusing entry"),
        ("envbuild-runs/run/link", tarfile.SYMTYPE, "not a regular file"),
        ("envbuild-runs/run/dev", tarfile.CHRTYPE, "not a regular file"),
    ],
)
def test_extract_runs_refuses_hostile_entries(tmp_path: Path, name: str, kind: bytes, message: str) -> None:
    data = archive([(name, b"x" if kind == tarfile.REGTYPE else None, kind)])
    with pytest.raises(BuildError, match=message):
        extract_runs(data, tmp_path / "runs")
    assert not (tmp_path / "escape.txt").exists()


def test_device_options_per_backend() -> None:
    assert device_options(LOCK, None) == {}  # cpu lock, no --gpus: no device flags
    cuda = device_options(replace(LOCK, backend="cuda"), None)
    (request,) = cuda["device_requests"]
    assert request["Count"] == -1 and request["Capabilities"] == [["gpu"]]
    two = device_options(replace(LOCK, backend="cuda"), 2)
    assert two["device_requests"][0]["Count"] == 2
    rocm = device_options(replace(LOCK, backend="rocm"), None)
    # the host's group ids of the nodes (validate --image reads them), never the name "video"
    assert rocm == {"devices": ["/dev/kfd:/dev/kfd:rwm", "/dev/dri:/dev/dri:rwm"]}
    with_ids = device_options(replace(LOCK, backend="rocm"), None, ("110", "44"))
    assert with_ids["group_add"] == ["110", "44"]
    assert device_options(LOCK, 1)["device_requests"][0]["Count"] == 1  # explicit --gpus on a cpu lock
    assert device_options(replace(LOCK, backend="cuda"), 0) == {}  # --gpus none
    assert device_options(replace(LOCK, backend="rocm"), 0) == {}
