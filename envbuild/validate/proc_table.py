"""The subreaper and ``/proc`` (:mod:`envbuild.validate.runner`): while a run is in progress the
validator is a child subreaper, so its orphans stay where the process table finds them."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37


# ----------------------------------------------------------------------------------------------------
# the subreaper and /proc


class Subreaper:
    """Reference-counted ``PR_SET_CHILD_SUBREAPER``: set while any run is in progress, then restored."""

    _lock = threading.Lock()
    _users = 0
    _previous = 0
    _libc: Any = None
    _available: bool | None = None

    @classmethod
    def _prctl(cls) -> Any:
        if cls._available is None:
            cls._available = False
            if sys.platform.startswith("linux"):
                try:
                    cls._libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
                    cls._available = hasattr(cls._libc, "prctl")
                except OSError:  # pragma: no cover - no libc to load
                    cls._available = False
        return cls._libc.prctl if cls._available else None

    @classmethod
    def acquire(cls) -> bool:
        """Make this process a subreaper; whether it is one now."""
        with cls._lock:
            prctl = cls._prctl()
            if prctl is None:
                return False
            if cls._users == 0:
                current = ctypes.c_int(0)
                if prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(current), 0, 0, 0) != 0:
                    return False
                if not current.value and prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
                    return False
                cls._previous = current.value
            cls._users += 1
            return True

    @classmethod
    def release(cls) -> None:
        with cls._lock:
            cls._users -= 1
            if cls._users == 0 and not cls._previous:
                prctl = cls._prctl()
                if prctl is not None:
                    prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


@dataclass(frozen=True)
class ProcStat:
    state: str
    ppid: int
    pgid: int
    sid: int
    start: int  # clock ticks after boot


PROC = Path("/proc")


def proc_stat(pid: int) -> ProcStat | None:
    """The fields of ``/proc/PID/stat`` envbuild reads, or None when there is no such process."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    except OSError:
        return None
    try:
        raw = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        return ProcStat(fields[0].decode(), int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))
    except (IndexError, ValueError):  # pragma: no cover - a format this code does not know
        return None


def process_table() -> dict[int, ProcStat]:
    table: dict[int, ProcStat] = {}
    try:
        names = os.listdir(PROC)
    except OSError:
        return table
    for name in names:
        if name.isdigit():
            st = proc_stat(int(name))
            if st is not None:
                table[int(name)] = st
    return table


def is_dead(st: ProcStat) -> bool:
    return st.state in ("Z", "X", "x")


def descendants(pid: int) -> set[int]:
    """Every live process under ``pid`` (children, their children, ...), from ``/proc``."""
    children: dict[int, list[int]] = {}
    for child, st in process_table().items():
        if not is_dead(st):
            children.setdefault(st.ppid, []).append(child)
    found: set[int] = set()
    pending = [pid]
    while pending:
        for child in children.get(pending.pop(), ()):
            if child not in found:
                found.add(child)
                pending.append(child)
    return found
