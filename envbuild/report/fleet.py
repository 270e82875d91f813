"""``envbuild report fleet RUN...``: the runs of one order's lots side by side, with the outliers flagged.

One row per run folder: the verdict, the first failure, the driver, the GPUs' names and UUIDs, a hash of
the installed package set (every distribution and version the packages stage recorded), the duration of
each stage and of the whole run, and the matmul GFLOP/s of the compute stage.

Outliers:

- a number (a duration, a GFLOP/s figure) more than :data:`MAD_LIMIT` median absolute deviations from
  the median of the lots AND more than :data:`FLOOR` (10 %) away from the median.  The floor keeps
  noise out when the lots agree closely (a MAD of 0 would otherwise flag any difference).  A duration
  must also be more than :data:`MIN_SECONDS` (1 s, ``report diff``'s noise floor) away: a 0.3 s stage
  that takes 0.6 s on a busy lot says nothing about the lot;
- a name or version (verdict, driver, GPU names, package set) that the majority of the lots does not
  share, naming those lots; when no value is held by more than half the lots, every value is named;
- a GPU UUID seen in more than one lot (two lots on the same card).

Output: a terminal table (rich), ``--json``, ``--html FILE`` (templates/report/fleet.html.j2: one
self-contained page, inline CSS, a CSP that allows no script and no fetch, every string escaped by
Jinja's autoescape).
"""

from __future__ import annotations

import hashlib
import statistics
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from envbuild.report.diff import TIMING_MIN_S, device_rows, installed_distributions
from envbuild.report.fleet_group import figures_of, incomplete, node_of
from envbuild.report.hardware import hardware_summary
from envbuild.report.html import CSP
from envbuild.report.model import Report
from envbuild.report.verify import load_report

MAD_LIMIT = 3.0
FLOOR = 0.10
MIN_SECONDS = TIMING_MIN_S  # durations only: report diff's noise floor
DRIFT_SHOWN = 5  # distributions named in a package-set outlier
TEMPLATE = "report/fleet.html.j2"
RAN = ("passed", "failed", "timed_out")  # a skipped or aborted stage's 0 s is not a duration


@dataclass(frozen=True)
class Lot:
    """One run, as the fleet table shows it."""

    lot: str  # the run folder's name (its path when two folders share a name)
    path: str
    run_id: str
    verdict: str  # PASSED, FAILED, INTERRUPTED
    first_failure: str | None
    driver: str | None
    gpu_names: tuple[str, ...]
    gpu_uuids: tuple[str, ...]
    packages: str | None  # sha256 of the installed set's "name==version" lines (first 12); None: unknown
    package_count: int | None
    stages: dict[str, str] = field(default_factory=dict)  # stage -> status
    seconds: dict[str, float] = field(default_factory=dict)  # stage -> duration, for stages that ran
    total_s: float = 0.0
    gflops: dict[str, float] = field(default_factory=dict)  # "cpu float32" -> GFLOP/s
    hardware: str | None = None  # the hardware rules' findings ("ok", "E-HW-MIG, ..."); None: not read
    node: str | None = None  # validate --fleet: "1 of 2 at host:29500" (the lot's rank in its group)
    perf: dict[str, float] = field(default_factory=dict)  # the performance stage: "TFLOP/s cuda:0 bf16" -> x


@dataclass(frozen=True)
class Outlier:
    column: str  # "stage accelerator s", "total s", "driver", "packages", "gpu uuid", ...
    lots: tuple[str, ...]
    value: Any
    reference: Any  # the median, or the majority's value (None when there is no majority)
    text: str


@dataclass(frozen=True)
class Fleet:
    lots: tuple[Lot, ...]
    stages: tuple[str, ...]  # the stage columns, in ladder order
    outliers: tuple[Outlier, ...]
    notes: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """Every lot passed and nothing stands out."""
        return not self.outliers and all(lot.verdict == "PASSED" for lot in self.lots)


def package_hash(installed: dict[str, str]) -> str:
    text = "".join(f"{name}=={version}\n" for name, version in sorted(installed.items()))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def _lot(name: str, path: Path, report: Report) -> Lot:
    facts = {s.stage: s.facts for s in report.stages}
    devices = device_rows(report)
    installed = installed_distributions(report)
    gflops: dict[str, float] = {}
    for check in facts.get("compute", {}).get("checks") or []:
        if isinstance(check, dict) and isinstance(check.get("gflops"), (int, float)):
            gflops[f"{check.get('device')} {check.get('dtype')}"] = float(check["gflops"])
    verdict = "INTERRUPTED" if report.interrupted else ("PASSED" if report.ok else "FAILED")
    ff = report.first_failure
    return Lot(
        lot=name,
        path=str(path),
        run_id=report.run_id,
        verdict=verdict,
        first_failure=f"{ff.stage}: {ff.error}" if ff else None,
        driver=_str(facts.get("accelerator", {}).get("driver")),
        gpu_names=tuple(str(d.get("name")) for d in devices),
        gpu_uuids=tuple(str(d["uuid"]) for d in devices if d.get("uuid")),
        packages=package_hash(installed) if installed is not None else None,
        package_count=len(installed) if installed is not None else None,
        stages={s.stage: s.status for s in report.stages},
        seconds={s.stage: s.duration_s for s in report.stages if s.status in RAN},
        total_s=report.duration_s,
        gflops=gflops,
        hardware=hardware_summary(report.hardware),
        node=node_of(facts.get("performance", {}).get("fleet")),
        perf=figures_of(facts.get("performance", {})),
    )


def _str(value: object) -> str | None:
    return None if value is None else str(value)


def load_fleet(paths: list[Path]) -> Fleet:
    """Read every run folder's report.json (:func:`load_report`; a ReportError names the bad one)."""
    reports = [load_report(p) for p in paths]
    names = [p.resolve().name for p in paths]
    clash = {n for n, c in Counter(names).items() if c > 1}
    lots = tuple(
        _lot(str(p) if n in clash else n, p, r) for n, p, r in zip(names, paths, reports, strict=True)
    )
    fleet = compare_lots(lots)
    installed = {lot.lot: installed_distributions(r) for lot, r in zip(lots, reports, strict=True)}
    return replace(fleet, outliers=tuple(_with_drift(o, lots, installed) for o in fleet.outliers))


def _with_drift(o: Outlier, lots: tuple[Lot, ...], installed: dict[str, dict[str, str] | None]) -> Outlier:
    """A package-set outlier, with the distributions that differ from a lot of the majority's set."""
    if o.column != "packages" or o.reference is None:
        return o
    ref = next((lot.lot for lot in lots if lot.packages == o.reference), None)
    mine, theirs = installed.get(o.lots[0]), installed.get(ref) if ref else None
    if mine is None or theirs is None:
        return o
    drift = [
        f"{name} {theirs.get(name) or 'absent'} -> {mine.get(name) or 'absent'}"
        for name in sorted(set(mine) | set(theirs))
        if mine.get(name) != theirs.get(name)
    ]
    more = f", {len(drift) - DRIFT_SHOWN} more" if len(drift) > DRIFT_SHOWN else ""
    return replace(o, text=f"{o.text} ({', '.join(drift[:DRIFT_SHOWN])}{more}, against {ref})")


def compare_lots(lots: tuple[Lot, ...]) -> Fleet:
    order = tuple(dict.fromkeys(s for lot in lots for s in lot.stages))
    outliers: list[Outlier] = []
    notes: list[str] = []
    unknown = [lot.lot for lot in lots if lot.packages is None]
    if unknown:
        notes.append(
            "package set unknown for "
            + ", ".join(unknown)
            + " (no packages stage, or a report.json from before envbuild recorded every installed "
            "distribution)"
        )
    if len(lots) < 3:
        notes.append(f"{len(lots)} lot(s): a median needs 3 or more to single out a number")
    for label, get in (
        ("verdict", lambda lot: lot.verdict),
        ("driver", lambda lot: lot.driver),
        ("gpu names", lambda lot: ", ".join(lot.gpu_names) or None),
        ("packages", lambda lot: lot.packages),
        ("hardware", lambda lot: lot.hardware),
    ):
        outliers += categorical_outliers(label, [(lot.lot, get(lot)) for lot in lots])
    for stage in order:
        values = [(lot.lot, lot.seconds[stage]) for lot in lots if stage in lot.seconds]
        outliers += numeric_outliers(f"stage {stage} s", values, unit=" s", minimum=MIN_SECONDS)
    totals = [(lot.lot, lot.total_s) for lot in lots]
    outliers += numeric_outliers("total s", totals, unit=" s", minimum=MIN_SECONDS)
    for key in dict.fromkeys(k for lot in lots for k in lot.gflops):
        values = [(lot.lot, lot.gflops[key]) for lot in lots if key in lot.gflops]
        outliers += numeric_outliers(f"GFLOP/s {key}", values, unit=" GFLOP/s")
    for key in dict.fromkeys(k for lot in lots for k in lot.perf):
        values = [(lot.lot, lot.perf[key]) for lot in lots if key in lot.perf]
        outliers += numeric_outliers(key, values, unit=" " + key.split(" ", 1)[0])
    outliers += group_outliers(lots)
    seen: dict[str, list[str]] = {}
    for lot in lots:
        for uuid in dict.fromkeys(lot.gpu_uuids):
            seen.setdefault(uuid, []).append(lot.lot)
    for uuid, where in seen.items():
        if len(where) > 1:
            outliers.append(
                Outlier(
                    "gpu uuid",
                    tuple(where),
                    uuid,
                    None,
                    f"gpu uuid: {uuid} is in {len(where)} lots ({', '.join(where)}): the same card twice",
                )
            )
    return Fleet(lots, order, tuple(outliers), tuple(notes))


def group_outliers(lots: tuple[Lot, ...]) -> list[Outlier]:
    """A ``--fleet`` group whose reports do not hold each rank once (:func:`fleet_group.incomplete`)."""
    return [
        Outlier(
            "fleet group",
            g.lots,
            list(g.ranks),
            list(range(g.nodes)),
            f"fleet group {g.address}: the reports hold ranks {list(g.ranks)} of {g.nodes} lots (each rank "
            "once is a whole group: a report is missing, or a lot ran twice)",
        )
        for g in incomplete([(lot.lot, lot.node) for lot in lots])
    ]


def _fmt(value: float) -> str:
    return f"{value:.2f}"


def numeric_outliers(
    column: str, values: list[tuple[str, float]], unit: str = "", minimum: float = 0.0
) -> list[Outlier]:
    """Each value more than :data:`MAD_LIMIT` MADs from the median AND more than :data:`FLOOR` of the
    median away from it, and more than ``minimum`` (3 values at least)."""
    if len(values) < 3:
        return []
    numbers = [v for _, v in values]
    median = statistics.median(numbers)
    mad = statistics.median(abs(v - median) for v in numbers)
    out: list[Outlier] = []
    for lot, value in values:
        off = abs(value - median)
        if off > MAD_LIMIT * mad and off > FLOOR * abs(median) and off > minimum:
            pct = f"{(value - median) / median:+.0%}" if median else "from 0"
            out.append(
                Outlier(
                    column,
                    (lot,),
                    value,
                    median,
                    f"{column}: {lot} {_fmt(value)}{unit}, {pct} against the median {_fmt(median)}{unit} "
                    f"(MAD {_fmt(mad)}{unit})",
                )
            )
    return out


def categorical_outliers(column: str, values: list[tuple[str, str | None]]) -> list[Outlier]:
    """Every value the majority (more than half the lots) does not share, naming its lots; with no
    majority, every value and its lots."""
    if len(values) < 2:
        return []
    groups: dict[str | None, list[str]] = {}
    for lot, value in values:
        groups.setdefault(value, []).append(lot)
    if len(groups) == 1:
        return []
    top, lots = max(groups.items(), key=lambda item: len(item[1]))
    if 2 * len(lots) > len(values):
        return [
            Outlier(
                column,
                tuple(where),
                value,
                top,
                f"{column}: {_show(value)} in {', '.join(where)}; the majority "
                f"({len(lots)} of {len(values)}) has {_show(top)}",
            )
            for value, where in groups.items()
            if value != top
        ]
    listed = "; ".join(f"{_show(v)} in {', '.join(w)}" for v, w in groups.items())
    return [Outlier(column, tuple(lot for lot, _ in values), None, None, f"{column}: no majority: {listed}")]


def _show(value: str | None) -> str:
    return "unknown" if value is None else repr(value) if value == "" else value


def flagged(fleet: Fleet) -> dict[str, set[str]]:
    """lot -> the columns in which it is an outlier (for marking cells)."""
    out: dict[str, set[str]] = {}
    for o in fleet.outliers:
        for lot in o.lots:
            out.setdefault(lot, set()).add(o.column)
    return out


def to_json_data(fleet: Fleet) -> dict[str, Any]:
    """The ``--json`` payload (without the envelope)."""
    from dataclasses import asdict

    return {
        "lots": [asdict(lot) for lot in fleet.lots],
        "stages": list(fleet.stages),
        "outliers": [asdict(o) for o in fleet.outliers],
        "notes": list(fleet.notes),
        "thresholds": {"mad_limit": MAD_LIMIT, "floor": FLOOR, "min_seconds": MIN_SECONDS},
    }


def stage_cell(lot: Lot, stage: str) -> str:
    if stage in lot.seconds:
        return _fmt(lot.seconds[stage])
    return lot.stages.get(stage, "-")


def render_html(fleet: Fleet) -> str:
    """The page (templates/report/fleet.html.j2), rendered with envbuild's Jinja environment inside an
    ``{% autoescape true %}`` block: every string from a report is escaped."""
    from envbuild.templating import render_template

    marks = flagged(fleet)
    rows = []
    for lot in fleet.lots:
        cols = marks.get(lot.lot, set())
        rows.append(
            {
                "lot": lot.lot,
                "run_id": lot.run_id,
                "verdict": lot.verdict,
                "verdict_flag": "verdict" in cols,
                "first_failure": lot.first_failure or "",
                "driver": lot.driver or "-",
                "driver_flag": "driver" in cols,
                "gpu_names": ", ".join(lot.gpu_names) or "none",
                "gpu_names_flag": "gpu names" in cols,
                "gpu_uuids": list(lot.gpu_uuids),
                "gpu_uuids_flag": "gpu uuid" in cols,
                "packages": (f"{lot.packages} ({lot.package_count})" if lot.packages else "unknown"),
                "packages_flag": "packages" in cols,
                "hardware": lot.hardware or "not read",
                "hardware_flag": "hardware" in cols,
                "node": lot.node or "-",
                "node_flag": "fleet group" in cols,
                "stages": [
                    {"text": stage_cell(lot, s), "flag": f"stage {s} s" in cols} for s in fleet.stages
                ],
                "total": _fmt(lot.total_s),
                "total_flag": "total s" in cols,
            }
        )
    return render_template(
        TEMPLATE,
        csp=CSP,
        title=f"envbuild fleet: {len(fleet.lots)} lots",
        stages=list(fleet.stages),
        rows=rows,
        outliers=[o.text for o in fleet.outliers],
        notes=list(fleet.notes),
        mad_limit=MAD_LIMIT,
        floor_pct=round(FLOOR * 100),
        min_seconds=MIN_SECONDS,
        ok=fleet.ok,
    )
