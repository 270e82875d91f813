"""Issue 36, finding 1: a stranger without the token reaches torch's store beside two real lots.

Two lots run the performance stage's fleet part for real on loopback (envbuild's handshake, then the
collectives probe with one gloo rank per lot, as ``validate --fleet`` runs it), while
tests/fleet_stranger.py polls node 0's store port and joins as rank 1.  Lot 1 starts its rank 3 s late
(a slow interpreter), so the stranger, with torch already imported, is first at the store.

Whatever the race gives, the stranger never measures with the lots: the store listens on HOST only, a
stranger that gets into the group is named by every real rank (it cannot prove the token) and nothing
measured is kept, and node 0 names as its peer only the lot admitted by the handshake.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from validate_support import cpu_lock

from envbuild.catalog.perf_rows import load_performance
from envbuild.report.model import StageResult
from envbuild.validate.performance_stage import _with_fleet
from envbuild.validate.rendezvous import TRANSPORT_NOTE, parse_fleet
from envbuild.validate.stage_context import ProbeFailed, StageContext

TOKEN = "fleet-token-for-tests-0123456789"
STAGE_TIMEOUT_S = 24.0  # the handshake waits half; the probe stops its ranks at 0.9 of it
STRANGER = Path(__file__).with_name("fleet_stranger.py")


def free_pair() -> int:
    """A port whose next port is free too (PORT for the handshake, PORT+1 for the store)."""
    for _ in range(50):
        with socket.socket() as a, socket.socket() as b:
            a.bind(("127.0.0.1", 0))
            port = int(a.getsockname()[1])
            try:
                b.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return port
    raise AssertionError("no two free ports in a row")


def run_lot(rank: int, port: int, python: str, workdir: Path, out: dict[Any, Any]) -> None:
    ctx = StageContext(
        lock=cpu_lock(workdir), python=python, workdir=workdir, timeouts={"performance": STAGE_TIMEOUT_S}
    )
    ctx.fleet = parse_fleet(f"127.0.0.1:{port}", 2, rank, TOKEN)
    passed = StageResult(stage="performance", status="passed", facts={})
    start = time.monotonic()
    try:
        out[rank] = _with_fleet(ctx, passed, load_performance(), 2.0, "gloo", 4 << 20)
    except ProbeFailed as exc:  # the probe itself overran (the stage runner records it so)
        out[rank] = exc.result
    out[f"seconds {rank}"] = time.monotonic() - start


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["tcp", "store"])
def test_a_stranger_at_the_store_never_measures_with_the_lots(mode: str, tmp_path: Path) -> None:
    port = free_pair()
    slow = tmp_path / "slow-python"
    slow.write_text(f'#!/bin/sh\nsleep 3\nexec "{sys.executable}" "$@"\n', encoding="utf-8")
    slow.chmod(0o755)
    errors = (tmp_path / "stranger.err").open("wb")
    stranger = subprocess.Popen(
        [sys.executable, str(STRANGER), "127.0.0.1", str(port + 1), "1", "2", str(time.time() + 60), mode],
        stdout=subprocess.PIPE,
        stderr=errors,
        text=True,
    )
    try:
        assert stranger.stdout is not None and "STRANGER ready" in stranger.stdout.readline()
        out: dict[Any, Any] = {}
        lots = [
            threading.Thread(target=run_lot, args=(0, port, sys.executable, tmp_path, out)),
            threading.Thread(target=run_lot, args=(1, port, str(slow), tmp_path, out)),
        ]
        for lot in lots:
            lot.start()
        for lot in lots:
            lot.join(STAGE_TIMEOUT_S + 30)
            assert not lot.is_alive()
        said, _ = stranger.communicate(timeout=30)
    finally:
        stranger.kill()
        errors.close()
    seen = [ln for ln in said.splitlines() if ln.startswith("STRANGER")]
    node0, lot1 = out[0], out[1]
    # the stranger never measured with the lots
    assert "STRANGER all_reduce done" not in said, seen
    # node 0's rank bound the store to HOST only (torch given a host listens on every interface)
    (where,) = [ln for ln in seen if ln.startswith("STRANGER listening on")]
    assert where == "STRANGER listening on 127.0.0.1", seen
    # node 0 names as its peer only the lot its handshake admitted
    fleet = node0.facts["fleet"]
    assert len(fleet["peers"]) == 1 and fleet["transport"] == TRANSPORT_NOTE
    assert TRANSPORT_NOTE in (node0.hint or "")
    if "STRANGER in the group" in said:  # it took rank 1's place: named, and nothing kept
        assert node0.status == "failed", (node0.error, seen)
        assert "rank(s) 1 of the group could not prove the fleet token" in (node0.error or "")
        assert "admitted: rank 1 (127.0.0.1:" in (node0.error or "")
        assert fleet["network"] is None and fleet["all_reduce"]["sizes"] == []
        assert fleet["all_reduce"]["unproven"] == [1]
        assert lot1.status != "passed"
    else:  # the real lots formed their group: they pass, the stranger got nowhere
        assert node0.status == "passed", (node0.error, seen)
        assert lot1.status == "passed", lot1.error
        assert fleet["network"] is not None and fleet["all_reduce"]["unproven"] == []
    # both lots end within the stage's time, whatever the stranger does
    assert out["seconds 0"] < STAGE_TIMEOUT_S + 10 and out["seconds 1"] < STAGE_TIMEOUT_S + 10
