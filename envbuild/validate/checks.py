"""The ``checks`` stage: the profile's own pilot commands, run as argv (never a shell) in the workdir.

Each check runs through :func:`envbuild.validate.runner.run_process` (stdout and stderr merged into one
bounded tail): on a timeout every process it started is killed, and a check that exits but leaves
processes behind (a ``setsid`` daemon) has them killed too, reported as ``stragglers_killed``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from envbuild.models import CheckSpec
from envbuild.typed import replace
from envbuild.validate.decide import result, skipped
from envbuild.validate.model import StageResult
from envbuild.validate.redact import redact_text
from envbuild.validate.runner import run_process

TAIL = 2000
_MISSING = object()


def _dotted(obj: Any, key: str) -> Any:
    for part in key.split("."):
        if isinstance(obj, dict) and part in obj:
            obj = obj[part]
        elif isinstance(obj, list) and part.isdigit() and int(part) < len(obj):
            obj = obj[int(part)]
        else:
            return _MISSING
    return obj


def expectation_failures(check: CheckSpec, workdir: Path, returncode: int) -> list[str]:
    fails: list[str] = []
    if returncode != check.expect_exit:
        fails.append(f"exit status {returncode}, expected {check.expect_exit}")
    for rel in check.expect_files:
        path = workdir / rel
        if not path.is_file():
            fails.append(f"expected file {rel} does not exist")
        elif path.stat().st_size == 0:
            fails.append(f"expected file {rel} is empty")
    for spec, want in check.expect_json.items():
        file, sep, key = spec.partition(":")
        if not sep:
            fails.append(f"expect_json key {spec!r} is not 'file.json:dotted.key'")
            continue
        try:
            data = json.loads((workdir / file).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            fails.append(f"{file}: cannot read JSON ({exc})")
            continue
        got = _dotted(data, key)
        if got is _MISSING:
            fails.append(f"{file}: key {key} is absent (expected {want!r})")
        elif got != want or isinstance(got, bool) != isinstance(want, bool):
            fails.append(f"{file}: {key} is {got!r}, expected {want!r}")
    return fails


def run_check(
    check: CheckSpec, workdir: Path, timeout_s: float | None = None, *, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Run one check; ``env`` replaces the validator's environment for it (None: inherited)."""
    limit = timeout_s if timeout_s is not None else float(check.timeout_s)
    entry: dict[str, Any] = {"name": check.name, "argv": list(check.run)}
    try:
        run = run_process(list(check.run), timeout_s=limit, cwd=workdir, env=env, merge_stderr=True)
    except OSError as exc:
        entry.update(status="failed", error=f"cannot run {check.run[0]!r}: {exc.strerror or exc}")
        return entry
    entry["seconds"] = round(run.duration_s, 3)
    entry["output_tail"] = redact_text(run.stdout.tail.decode("utf-8", errors="replace")[-TAIL:])
    entry["returncode"] = run.returncode
    facts = run.facts()
    facts.pop("stderr_dropped_bytes")  # stderr goes into the same pipe as stdout
    entry["output_dropped_bytes"] = facts.pop("stdout_dropped_bytes")
    entry.update(facts)
    if run.timed_out:
        entry.update(status="timed_out", error=f"did not finish within {limit:g} s; killed")
        return entry
    if run.returncode is None:  # pragma: no cover - the check would not die (uninterruptible sleep)
        entry.update(status="failed", error="exited, but could not be reaped")
        return entry
    fails = expectation_failures(check, workdir, run.returncode)
    entry["status"] = "failed" if fails else "passed"
    if fails:
        entry["error"] = "; ".join(fails)
    return entry


def run_checks(
    checks: tuple[CheckSpec, ...],
    workdir: Path,
    timeout_s: float | None = None,
    *,
    env: Mapping[str, str] | None = None,
    cancel: threading.Event | None = None,
) -> StageResult:
    """Run every check; ``timeout_s`` (``--timeout checks=N``) replaces each check's own limit; ``env``
    (None: the validator's own) is the checks' environment, its ``PATH`` included (argv[0] lookup).
    ``cancel`` (set by another thread) stops before the next check."""
    if not checks:
        return skipped("checks", "the lock declares no checks")
    entries = []
    for check in checks:
        if cancel is not None and cancel.is_set():
            break
        entries.append(run_check(check, workdir, timeout_s, env=env))
    bad = next((e for e in entries if e["status"] != "passed"), None)
    if bad is None:
        return result("checks", checks=entries, workdir=str(workdir))
    res = result(
        "checks",
        f"check {bad['name']!r}: {bad['error']}",
        "see the check's output tail in the report",
        checks=entries,
        workdir=str(workdir),
    )
    if bad["status"] == "timed_out":
        return replace(res, status="timed_out")
    return res
