"""Result models of the validator: one :class:`StageResult` per stage, one :class:`Report` per run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal

from envbuild.boundary import INPUT

Status = Literal["passed", "failed", "skipped", "aborted", "timed_out"]
REPORT_FORMAT: Final = "envbuild.report/1"

# Statuses that let a dependent stage run (a skipped stage was not applicable, and said why).
OK_STATUSES: frozenset[str] = frozenset({"passed", "skipped"})


@dataclass(frozen=True, kw_only=True)
class StageResult:
    stage: str
    status: Status
    duration_s: float = 0.0
    facts: dict[str, Any] = field(default_factory=dict)
    error: str | None = None  # the first error, one line
    hint: str | None = None  # what to do next

    @property
    def ok(self) -> bool:
        return self.status in OK_STATUSES


@dataclass(frozen=True, kw_only=True)
class FirstFailure:
    stage: str
    error: str


@dataclass(frozen=True, kw_only=True)
class LockRef:
    path: str
    sha256: str
    content: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class Report:
    __pydantic_config__ = INPUT  # read from outside: see envbuild.boundary

    format: Literal["envbuild.report/1"] = REPORT_FORMAT
    run_id: str
    envbuild_version: str
    started_at: str
    finished_at: str
    duration_s: float
    python: str  # the interpreter under test
    workdir: str
    lock: LockRef
    stages: tuple[StageResult, ...]
    first_failure: FirstFailure | None
    stage_reached: str | None  # the last stage that ran (skipped ones and those never started do not count)
    ok: bool
    interrupted: bool = False
    signal: str | None = None
    host: dict[str, Any] = field(default_factory=dict)
    # the devices stage's live hardware reading (issue 26): source, facts, each rule's verdict, findings
    hardware: dict[str, Any] | None = None

    def stage(self, name: str) -> StageResult:
        for result in self.stages:
            if result.stage == name:
                return result
        raise KeyError(name)
