"""A run folder knows whether its run completed: ``RUNNING.json`` from the start, removed at the end.

:func:`start_run` writes ``RUNNING.json`` into a fresh run folder before any stage runs: the run's id,
the validator's pid and start time (``/proc/PID/stat``), the host and its boot id.  It also marks the
validator's environment with ``ENVBUILD_VALIDATE_RUN=<run id>``, which every probe, the warm worker,
every pilot check and whatever they start inherit.  :func:`finish_run` removes the marker once the
report's manifest is written, and the environment variable with it.

A validator killed with SIGKILL does neither.  Its probes then live on: they run in sessions of their
own and are re-parented to init (a hanging probe, or a daemon a check started, runs until it ends by
itself).  The next run in the same ``--out`` calls :func:`settle_stale_runs` before it starts: a marker
whose validator is gone (no such pid, another process under that pid, or another boot) is a run that
did not complete.  Every process still carrying its ``ENVBUILD_VALIDATE_RUN`` is killed (SIGKILL) and
the marker becomes ``INCOMPLETE.json``, recording who found it and how many processes were left over;
the caller says so.  A marker whose validator is alive (a run in progress, in this folder, now) or
written on another host (an ``--out`` on a shared disk) is left alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from envbuild.report.folder import atomic_write
from envbuild.validate.proc_table import proc_stat

RUNNING = "RUNNING.json"
INCOMPLETE = "INCOMPLETE.json"
RUN_ENV = "ENVBUILD_VALIDATE_RUN"
_KILL_WAIT_S = 5.0


@dataclass(frozen=True)
class StaleRun:
    """A previous run in the same ``--out`` that did not complete."""

    run_id: str
    folder: Path
    pid: int | None
    started_at: str
    leftovers_killed: int  # processes of that run still alive, killed now

    @property
    def message(self) -> str:
        left = (
            f"; killed {self.leftovers_killed} of its process(es) still running"
            if self.leftovers_killed
            else "; none of its processes was still running"
        )
        return (
            f"the previous run {self.run_id} (started {self.started_at}, validator pid {self.pid}) did not "
            f"complete: it was killed before writing its report{left}. Its folder {self.folder} is kept, "
            f"marked {INCOMPLETE}"
        )


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except OSError:
        return None


def _start_ticks(pid: int) -> int | None:
    """The process's start time (clock ticks after boot), None when it is gone or a zombie."""
    st = proc_stat(pid)
    return st.start if st is not None and st.state not in ("Z", "X") else None


def start_run(run_dir: Path) -> None:
    """Write ``run_dir/RUNNING.json`` (raises :class:`OSError`) and mark the environment with the run id."""
    pid = os.getpid()
    marker = {
        "run_id": run_dir.name,
        "pid": pid,
        "pid_start_ticks": _start_ticks(pid),
        "host": socket.gethostname(),
        "boot_id": _boot_id(),
        "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    atomic_write(run_dir / RUNNING, json.dumps(marker, indent=2) + "\n")
    os.environ[RUN_ENV] = run_dir.name


def clear_env(run_dir: Path) -> None:
    """Take the run's mark off the validator's environment (before env.txt is written)."""
    if os.environ.get(RUN_ENV) == run_dir.name:
        del os.environ[RUN_ENV]


def finish_run(run_dir: Path) -> None:
    """The report is complete (its manifest written): the run folder no longer says it is running."""
    clear_env(run_dir)
    with contextlib.suppress(FileNotFoundError):
        (run_dir / RUNNING).unlink()


def _read_marker(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _alive(marker: dict[str, Any]) -> bool:
    """Whether the marker's validator still runs (same boot, same pid, same start time)."""
    if marker.get("boot_id") and _boot_id() and marker["boot_id"] != _boot_id():
        return False
    pid = marker.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    ticks = _start_ticks(pid)
    return ticks is not None and ticks == marker.get("pid_start_ticks")


def _ancestors() -> set[int]:
    """This process and its parents: never killed, even when they carry the stale run's mark."""
    seen, pid = set(), os.getpid()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        st = proc_stat(pid)
        if st is None:
            break
        pid = st.ppid
    return seen


def _marked(run_id: str) -> Iterator[int]:
    """Live processes whose environment carries ``ENVBUILD_VALIDATE_RUN=run_id``."""
    needle = f"{RUN_ENV}={run_id}".encode()
    spare = _ancestors()
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    for name in names:
        if not name.isdigit() or int(name) in spare:
            continue
        try:
            environ = Path(f"/proc/{name}/environ").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        if needle in environ.split(b"\0") and _start_ticks(int(name)) is not None:
            yield int(name)


def kill_leftovers(run_id: str) -> int:
    """SIGKILL every live process of run ``run_id``, in rounds until none is left; how many there were."""
    killed: set[int] = set()
    deadline = time.monotonic() + _KILL_WAIT_S
    while True:
        live = list(_marked(run_id))
        if not live or time.monotonic() > deadline:
            break
        for pid in live:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        time.sleep(0.05)
    return len(killed)


def settle_stale_runs(out: Path) -> list[StaleRun]:
    """Find the runs under ``out`` that did not complete; kill what is left of them; mark them."""
    found: list[StaleRun] = []
    if not out.is_dir():
        return found
    host = socket.gethostname()
    for marker_path in sorted(out.glob(f"*/{RUNNING}")):
        marker = _read_marker(marker_path)
        folder = marker_path.parent
        if marker is None:
            continue  # being written this instant by a run starting now, or not ours: leave it
        if marker.get("host") not in (None, host) or _alive(marker):
            continue
        if (folder / "MANIFEST.sha256").is_file():  # killed between its manifest and this marker
            with contextlib.suppress(OSError):
                marker_path.unlink()
            continue
        run_id = str(marker.get("run_id") or folder.name)
        stale = StaleRun(
            run_id=run_id,
            folder=folder,
            pid=marker.get("pid") if isinstance(marker.get("pid"), int) else None,
            started_at=str(marker.get("started_at") or "?"),
            leftovers_killed=kill_leftovers(run_id),
        )
        record = {
            **marker,
            "found_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "leftovers_killed": stale.leftovers_killed,
            "note": "this run did not complete (its validator was killed before writing the report)",
        }
        with contextlib.suppress(OSError):
            atomic_write(folder / INCOMPLETE, json.dumps(record, indent=2) + "\n")
            marker_path.unlink()
        found.append(stale)
    return found
