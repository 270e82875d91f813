"""Check a (copied) report directory against its manifest, and compare two reports."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from envbuild.boundary import InvalidData, parse_json
from envbuild.digest import sha256_file
from envbuild.errors import ReportError
from envbuild.validate.model import Report
from envbuild.validate.report import MANIFEST

_LINE = re.compile(r"^([0-9a-f]{64}) [ *](.+)$")


def verify_report(directory: Path) -> list[str]:
    """Every problem: missing, changed and extra files, a malformed manifest.  Empty means intact."""
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
        if path.name != MANIFEST and path.name not in listed:
            problems.append(f"extra: {path.name}")
    return problems


def load_report(directory: Path) -> Report:
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


def _packages(report: Report) -> dict[str, Any]:
    for s in report.stages:
        if s.stage == "packages":
            return dict(s.facts.get("declared_installed", {}))
    return {}


def _devices(report: Report) -> list[str]:
    for s in report.stages:
        if s.stage == "devices":
            return [
                f"{d.get('name')} {d.get('arch')} {d.get('memory_gib')} GiB"
                for d in s.facts.get("devices", [])
            ]
    return []


def _fact(report: Report, stage: str, key: str) -> Any:
    for s in report.stages:
        if s.stage == stage:
            return s.facts.get(key)
    return None


def diff_reports(a: Report, b: Report) -> list[str]:
    """Human-readable differences: result, stage statuses, packages, devices, driver, interpreter, OS."""
    out: list[str] = []
    if a.ok != b.ok:
        out.append(f"result: {'passed' if a.ok else 'failed'} -> {'passed' if b.ok else 'failed'}")
    if a.lock.sha256 != b.lock.sha256:
        out.append(f"lock: {a.lock.sha256[:12]} -> {b.lock.sha256[:12]}")
    sa = {s.stage: s.status for s in a.stages}
    sb = {s.stage: s.status for s in b.stages}
    for stage in list(dict.fromkeys([*sa, *sb])):
        if sa.get(stage) != sb.get(stage):
            out.append(f"stage {stage}: {sa.get(stage, 'absent')} -> {sb.get(stage, 'absent')}")
    pa, pb = _packages(a), _packages(b)
    for name in sorted(set(pa) | set(pb)):
        if pa.get(name) != pb.get(name):
            out.append(f"package {name}: {pa.get(name) or 'absent'} -> {pb.get(name) or 'absent'}")
    da, db = _devices(a), _devices(b)
    if da != db:
        out.append(f"devices: {da or 'none'} -> {db or 'none'}")
    for stage, key, label in (
        ("accelerator", "driver", "driver"),
        ("accelerator", "torch_version", "torch"),
        ("interpreter", "version", "python"),
        ("os", "pretty_name", "os"),
        ("os", "libc_version", "glibc"),
    ):
        va, vb = _fact(a, stage, key), _fact(b, stage, key)
        if va != vb:
            out.append(f"{label}: {va} -> {vb}")
    return out
