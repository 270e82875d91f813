"""The all-reduce sweep (probes/probe_collectives.py, issue 34): its budget starts once the group has
formed, sizes up to 64 MiB are always measured, and only the probe's own limit cuts them short."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

PROBE = Path(__file__).resolve().parent.parent / "envbuild" / "validate" / "probes" / "probe_collectives.py"
MIB = 1 << 20


@pytest.fixture(scope="module")
def collectives() -> ModuleType:
    """The probe imported (it imports only the standard library until it runs)."""
    spec = importlib.util.spec_from_file_location("probe_collectives_under_test", PROBE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rank_0_goes_on_to_64_mib_past_the_budget_then_stops(collectives: ModuleType) -> None:
    """Rank 0's decision after each size, on its clock: the group formed at 100 s, a 5 s budget, the
    probe's limit at 200 s, 256 MiB at most."""
    cfg: dict[str, Any] = {"max_bytes": 256 * MIB, "budget_s": 5.0, "stop_s": 200.0}

    def after(size: int, now: float, took: float = 0.1) -> str | None:
        return collectives.stop_after(size * MIB, now, 100.0, took, cfg)

    assert after(1, 150.0) is None  # the budget is long spent: below 64 MiB the sweep goes on
    assert after(32, 150.0) is None  # 64 MiB next: still the minimum sweep
    assert after(64, 150.0) == "budget"  # above 64 MiB the budget bounds it
    assert after(64, 104.0) is None and after(128, 104.0) is None  # within the budget: up to max_bytes
    assert after(256, 104.0) == "max_bytes"
    assert after(8, 199.0, took=1.0) == "time limit"  # the probe's limit cuts even the minimum sweep
    assert collectives.MIN_BYTES == 64 * MIB


@pytest.mark.slow
def test_a_gloo_group_sweeps_to_64_mib_however_long_it_took_to_form() -> None:
    """Two gloo ranks on loopback with a 0.05 s budget, less than importing torch takes: the start-up
    used to be charged to it, and the sweep stopped at 1-16 MiB (0.5 s after joining, at the least)."""
    args = {"world": 2, "backend": "gloo", "budget_s": 0.05, "max_bytes": 256 * MIB, "timeout_s": 120}
    proc = subprocess.run(
        [sys.executable, str(PROBE)],
        input=json.dumps(args),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("ENVBUILD-RESULT "))
    out = json.loads(line.split(" ", 1)[1])
    assert out["errors"] == [] and out["sums_ok"] is True, proc.stderr[-2000:]
    assert [s["bytes"] // MIB for s in out["sizes"]] == [1, 2, 4, 8, 16, 32, 64]
    assert out["stopped"] == "budget" and out["startup_s"] > 0.05  # formed after the budget would have ended
