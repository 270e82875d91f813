"""The ``checks`` stage: the profile's own pilot commands, run as argv (never a shell) in the workdir.

Each check runs through :func:`envbuild.validate.runner.run_process` (stdout and stderr merged into one
bounded tail): on a timeout every process it started is killed, and a check that exits but leaves
processes behind (a ``setsid`` daemon) has them killed too, reported as ``stragglers_killed`` and as a
warning of the stage (``--strict`` makes it an error).

No pass on old files: every file an ``expect_files`` / ``expect_json`` entry names is looked at
(``os.stat``) right before the check starts.  After it, a file that existed before must have changed:
another inode (written anew and renamed into place), another ``mtime_ns`` or another size.  A file
unchanged on all three was not written during the run, and the assertion fails naming it; the file
itself is never moved or deleted.  Each assertion is recorded with what was expected and what was
found (``assertions`` of the check's entry in report.json).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from envbuild.models import CheckSpec
from envbuild.report.model import StageResult
from envbuild.report.redact import redact_tail_text
from envbuild.validate.decide import result, skipped
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


Snapshot = tuple[int, int, int]  # (st_ino, st_mtime_ns, st_size)


def _stat(path: Path) -> Snapshot | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def expected_paths(check: CheckSpec) -> list[str]:
    """Every file the check's expectations name (``expect_files``, then ``expect_json``'s files), once."""
    names = list(check.expect_files)
    for spec in check.expect_json:
        file, sep, _ = spec.partition(":")
        if sep and file not in names:
            names.append(file)
    return names


def snapshot(check: CheckSpec, workdir: Path) -> dict[str, Snapshot | None]:
    """Inode, mtime_ns and size of each expected file before the run (None: not there)."""
    return {rel: _stat(workdir / rel) for rel in expected_paths(check)}


def _stale(before: Snapshot | None, now: Snapshot | None) -> bool:
    return before is not None and now == before


def assertions(
    check: CheckSpec, workdir: Path, returncode: int, before: Mapping[str, Snapshot | None] | None = None
) -> list[dict[str, Any]]:
    """Each expectation with what was expected, what was found, and whether it held (``ok``);
    ``error`` says why one failed.  ``before`` (:func:`snapshot`): a file unchanged since then fails."""
    before = before or {}
    out: list[dict[str, Any]] = []

    def add(kind: str, target: str, expected: Any, actual: Any, error: str | None) -> None:
        entry = {"kind": kind, "target": target, "expected": expected, "actual": actual, "ok": error is None}
        if error is not None:
            entry["error"] = error
        out.append(entry)

    exit_error = (
        None if returncode == check.expect_exit else f"exit status {returncode}, expected {check.expect_exit}"
    )
    add("exit", "exit status", check.expect_exit, returncode, exit_error)
    stale_note = "unchanged since before the check (same inode, mtime and size): not written during its run"
    for rel in check.expect_files:
        path = workdir / rel
        now = _stat(path)
        expected = "a non-empty file written during the check"
        if now is None or not path.is_file():
            add("file", rel, expected, "missing", f"expected file {rel} does not exist")
        elif _stale(before.get(rel), now):
            add("file", rel, expected, f"stale: {stale_note}", f"expected file {rel} is stale: {stale_note}")
        elif now[2] == 0:
            add("file", rel, expected, "empty", f"expected file {rel} is empty")
        else:
            add("file", rel, expected, f"written, {now[2]} bytes", None)
    for spec, want in check.expect_json.items():
        file, sep, key = spec.partition(":")
        if not sep:
            add("json", spec, want, None, f"expect_json key {spec!r} is not 'file.json:dotted.key'")
            continue
        try:
            data = json.loads((workdir / file).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            add("json", spec, want, None, f"{file}: cannot read JSON ({exc})")
            continue
        got = _dotted(data, key)
        if got is _MISSING:
            add("json", spec, want, None, f"{file}: key {key} is absent (expected {want!r})")
        elif _stale(before.get(file), _stat(workdir / file)):
            add("json", spec, want, got, f"{file}: {key} is read from a stale file ({stale_note})")
        elif got != want or isinstance(got, bool) != isinstance(want, bool):
            add("json", spec, want, got, f"{file}: {key} is {got!r}, expected {want!r}")
        else:
            add("json", spec, want, got, None)
    return out


def expectation_failures(
    check: CheckSpec, workdir: Path, returncode: int, before: Mapping[str, Snapshot | None] | None = None
) -> list[str]:
    """Why the check's expectations do not hold (see :func:`assertions`), one message each."""
    return [str(a["error"]) for a in assertions(check, workdir, returncode, before) if not a["ok"]]


def run_check(
    check: CheckSpec, workdir: Path, timeout_s: float | None = None, *, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Run one check; ``env`` replaces the validator's environment for it (None: inherited)."""
    limit = timeout_s if timeout_s is not None else float(check.timeout_s)
    entry: dict[str, Any] = {"name": check.name, "argv": list(check.run)}
    before = snapshot(check, workdir)
    try:
        run = run_process(list(check.run), timeout_s=limit, cwd=workdir, env=env, merge_stderr=True)
    except OSError as exc:
        entry.update(status="failed", error=f"cannot run {check.run[0]!r}: {exc.strerror or exc}")
        return entry
    entry["seconds"] = round(run.duration_s, 3)
    entry["output_tail"] = redact_tail_text(run.stdout.tail.decode("utf-8", errors="replace"), TAIL)
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
    entry["assertions"] = assertions(check, workdir, run.returncode, before)
    fails = [str(a["error"]) for a in entry["assertions"] if not a["ok"]]
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
    warnings = [straggler_warning(e) for e in entries if e.get("stragglers_killed")]
    bad = next((e for e in entries if e["status"] != "passed"), None)
    if bad is None:
        return result(
            "checks",
            None,
            "; ".join(warnings) or None,
            checks=entries,
            workdir=str(workdir),
            warnings=warnings,
        )
    last = last_line(str(bad.get("output_tail") or ""))
    shown = f" (last output line: {last})" if last and bad.get("returncode") != 0 else ""
    res = result(
        "checks",
        f"check {bad['name']!r}: {bad['error']}{shown}",
        "see the check's output tail in the report",
        checks=entries,
        workdir=str(workdir),
        warnings=warnings,
    )
    if bad["status"] == "timed_out":
        return replace(res, status="timed_out")
    return res


def straggler_warning(entry: Mapping[str, Any]) -> str:
    n = int(entry.get("stragglers_killed") or 0)
    return (
        f"check {entry.get('name')!r} left {n} process{'es' if n != 1 else ''} running after it exited "
        f"(killed by envbuild); a job that leaves processes behind leaks them on a real run"
    )


LAST_LINE_MAX = 200


def last_line(text: str) -> str:
    """The last non-blank line of a check's output, at most :data:`LAST_LINE_MAX` characters."""
    line = next((ln.strip() for ln in reversed(text.splitlines()) if ln.strip()), "")
    return line if len(line) <= LAST_LINE_MAX else line[: LAST_LINE_MAX - 1] + "…"
