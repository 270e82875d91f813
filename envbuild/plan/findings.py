"""Collect findings in order; codes are stable and carry their severity's letter (E-/W-/I-)."""

from __future__ import annotations

from envbuild.models import Finding, Severity

_PREFIX: dict[Severity, str] = {"error": "E-", "warning": "W-", "info": "I-"}


class Findings:
    def __init__(self) -> None:
        self._items: list[Finding] = []

    def add(self, severity: Severity, code: str, message: str) -> None:
        if not code.startswith(_PREFIX[severity]):
            raise ValueError(f"finding code {code!r} does not match severity {severity}")
        finding = Finding(severity=severity, code=code, message=message)
        if finding not in self._items:
            self._items.append(finding)

    def error(self, code: str, message: str) -> None:
        self.add("error", code, message)

    def warning(self, code: str, message: str) -> None:
        self.add("warning", code, message)

    def info(self, code: str, message: str) -> None:
        self.add("info", code, message)

    def codes(self) -> list[str]:
        return [f.code for f in self._items]

    def result(self) -> tuple[Finding, ...]:
        order = {"error": 0, "warning": 1, "info": 2}
        return tuple(sorted(self._items, key=lambda f: order[f.severity]))
