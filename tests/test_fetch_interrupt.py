"""Ctrl-C during ``envbuild fetch``: the downloads in flight stop within 2 s and leave no partial file.

A real ``envbuild fetch`` runs in a subprocess against a loopback HTTP server that serves two locked
files: one trickles (1 KiB every 20 ms of a 64 MB body), the other sends its headers and then nothing
(a stalled server).  SIGINT is sent once both downloads' temporary files (``.NAME.<random>.tmp`` beside
each wheel) exist.  The bundle is the tiny test bundle with a lock edited by hand to name those two files
(their sha256 never matters: nothing completes).
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from build_support import lock_by_hand
from cli_support import ENVBUILD
from index_support import dripping_server

from envbuild import atomic

TINY = Path(__file__).parent / "data" / "bundles" / "tiny"
BODY = 64 * 1000 * 1000  # the Content-Length announced; far more than is ever sent


@pytest.fixture
def slow_server() -> Iterator[str]:
    """Every file announced as BODY bytes: ``/trickle/...`` drips 1 KiB every 20 ms, others stall."""
    with dripping_server(BODY) as base:
        yield base


def _bundle(folder: Path, base: str) -> Path:
    bundle = folder / "tiny"
    shutil.copytree(TINY, bundle)
    lock_by_hand(bundle)
    path = bundle / "envbuild.lock.json"
    lock = json.loads(path.read_text(encoding="utf-8"))
    lock["distributions"] = [
        {
            "name": name,
            "version": "1.0",
            "files": [
                {
                    "filename": f"{name}-1.0-py3-none-any.whl",
                    "url": f"{base}/{name}/{name}-1.0-py3-none-any.whl",
                    "sha256": "0" * 64,
                    "size": BODY,
                }
            ],
            "index": "https://pypi.org/simple",
        }
        for name in ("trickle", "stall")
    ]
    path.write_text(json.dumps(lock, indent=2) + "\n", encoding="utf-8")
    return bundle


def test_ctrl_c_stops_the_downloads_in_flight_and_removes_partial_files(
    tmp_path: Path, slow_server: str
) -> None:
    bundle = _bundle(tmp_path, slow_server)
    house = bundle / "wheelhouse"
    wheels = [house / f"{name}-1.0-py3-none-any.whl" for name in ("trickle", "stall")]

    def parts() -> list[Path]:  # each download's temporary file, once it has one
        return [p for wheel in wheels for p in atomic.leftovers(wheel)]

    proc = subprocess.Popen(
        [*ENVBUILD, "fetch", str(bundle), "--no-tools", "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As from a terminal: SIGINT at its default.  A test runner's worker may ignore SIGINT, and an
        # ignored signal stays ignored across exec (Python then installs no KeyboardInterrupt handler).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 60
        while not (
            len(found := parts()) == 2
            and any(p.name.startswith(".trickle-") and p.stat().st_size for p in found)
        ):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the downloads never started"
            time.sleep(0.05)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            pytest.fail("fetch was still running 15 s after Ctrl-C")
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert took < 2.0, f"fetch took {took:.2f} s to stop after Ctrl-C"
    assert err == "envbuild: interrupted\n"  # one line, no traceback
    assert out == ""
    assert parts() == []
    assert sorted(p.name for p in house.iterdir() if p.name.endswith((".tmp", ".part"))) == []
