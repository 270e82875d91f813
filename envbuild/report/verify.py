"""Check a (copied) report directory against its manifest (integrity, not authenticity: see
:mod:`envbuild.report.sign`), and read its report (two reports are compared by
:mod:`envbuild.report.diff`).

A report's verdict is derived from its stages, never taken from its stored ``ok`` (issue 36, finding
7): :func:`load_report` checks the folder against its manifest (as ``report verify`` does) and the
stored ``ok`` against the stages, and a report failing either is never a pass: its ``ok`` is false and
its ``first_failure`` names the problem (``report fleet`` and ``report diff`` read reports through it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from envbuild.boundary import InvalidData, parse_json
from envbuild.digest import sha256_file
from envbuild.errors import ReportError
from envbuild.report.folder import MANIFEST, SIGNATURE
from envbuild.report.model import FirstFailure, Report

_LINE = re.compile(r"^([0-9a-f]{64}) [ *](.+)$")


def verify_report(directory: Path) -> list[str]:
    """Every problem: missing, changed and extra files, a malformed manifest.  Empty means intact.

    Intact is integrity in transit (the copy has the bytes the manifest lists), not authenticity:
    whoever wrote the folder could have recomputed the manifest.  The signature (``MANIFEST.sha256.sig``,
    :mod:`envbuild.report.sign`) is neither listed nor an extra file."""
    if not directory.is_dir():
        raise ReportError(f"{directory}: not a report directory")
    manifest = directory / MANIFEST
    if not manifest.is_file():
        return [f"{MANIFEST} is missing (an incomplete or interrupted copy)"]
    try:
        text = manifest.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return [f"{MANIFEST} is not UTF-8 text (damaged in the copy?)"]
    except OSError as exc:
        raise ReportError(f"{manifest}: cannot read: {exc.strerror or exc}") from None
    problems: list[str] = []
    listed: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        m = _LINE.match(line)
        if not m or "/" in m.group(2) or m.group(2) in (".", ".."):
            problems.append(f"{MANIFEST}:{n}: malformed line {line[:80]!r}")
            continue
        listed[m.group(2)] = m.group(1)
    for name, digest in sorted(listed.items()):
        path = directory / name
        if not path.is_file():
            problems.append(f"missing: {name}")
        else:
            try:
                if sha256_file(path) != digest:
                    problems.append(f"changed: {name}")
            except OSError as exc:
                problems.append(f"unreadable: {name} ({exc.strerror or exc})")
    for path in sorted(directory.iterdir()):
        if path.name not in (MANIFEST, SIGNATURE) and path.name not in listed:  # the signature sits beside
            problems.append(f"extra: {path.name}")
    return problems


def derived_ok(report: Report) -> bool:
    """The verdict its stages give: at least one stage, each passed or skipped, and not interrupted."""
    return bool(report.stages) and not report.interrupted and all(s.ok for s in report.stages)


def verdict_problems(report: Report) -> list[str]:
    """Where the stored verdict (``ok``, ``first_failure``) disagrees with the stages; empty: it agrees."""
    derived = derived_ok(report)
    if report.ok and not derived:
        bad = [f"{s.stage} {s.status}" for s in report.stages if not s.ok]
        why = (
            "stage " + ", ".join(bad)
            if bad
            else ("the run was interrupted" if report.interrupted else "it records no stage")
        )
        return [f"report.json says ok: true, but {why}: the verdict is FAILED, derived from its stages"]
    if not report.ok and derived:
        return [
            "report.json says ok: false, but every stage passed or was skipped: its stored verdict disagrees"
        ]
    if derived and report.first_failure is not None:
        return [f"report.json names a first failure ({report.first_failure.stage}) though every stage passed"]
    return []


@dataclass(frozen=True)
class CheckedReport:
    """A report as read from its folder: ``report`` with its verdict derived (``ok`` false and the problem
    as ``first_failure`` when ``problems``), and what is wrong with the folder or its stored verdict."""

    report: Report
    problems: tuple[str, ...]


def check_report(directory: Path) -> CheckedReport:
    """Read ``directory``'s report.json, check the folder against its manifest (:func:`verify_report`) and
    the stored verdict against the stages (:func:`verdict_problems`)."""
    report = parse_report(directory)
    problems = [f"{MANIFEST}: {p}" for p in verify_report(directory)] + verdict_problems(report)
    if not problems:
        return CheckedReport(report, ())
    failed = next((s for s in report.stages if not s.ok), None)
    first = f"; first failed stage {failed.stage}: {failed.error or failed.status}" if failed else ""
    why = FirstFailure(stage="report", error="not counted as a pass: " + "; ".join(problems) + first)
    return CheckedReport(replace(report, ok=False, first_failure=why), tuple(problems))


def load_report(directory: Path) -> Report:
    """The report in ``directory`` with its verdict derived (see :func:`check_report`)."""
    return check_report(directory).report


def parse_report(directory: Path) -> Report:
    """``directory``'s report.json as it is (its stored verdict unchecked)."""
    if not directory.is_dir():
        raise ReportError(f"{directory}: not a report directory")
    path = directory / "report.json"
    try:
        return parse_json(Report, path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ReportError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ReportError(f"{path}: not UTF-8 text (expected envbuild.report/1 JSON)") from None
    except InvalidData as exc:
        raise ReportError(f"{path}: {exc} (expected envbuild.report/1)") from None
