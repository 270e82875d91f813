"""``envbuild report diff A B``: two reports compared (:func:`compare_reports`): the result, the lock,
each stage's status, every installed distribution, the hardware, the software, and stage timings beyond
noise; also the views of a report ``report fleet`` shares (:func:`installed_distributions`,
:func:`device_rows`).  Reports are read through :mod:`envbuild.report.verify` (verdicts derived).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from packaging.utils import canonicalize_name

from envbuild.report.hardware import hardware_differences
from envbuild.report.model import Report

# Stage timings differ beyond noise when they are more than TIMING_MIN_S seconds apart AND the longer is
# more than TIMING_RATIO times the shorter (50 % above it): a 0.2 s stage that takes 0.5 s on the other
# run is noise, so is 60 s against 63 s; 10 s against 16 s is not.
TIMING_MIN_S = 1.0
TIMING_RATIO = 1.5


@dataclass(frozen=True)
class Change:
    """One difference between two reports: what it is about (``kind``: result, lock, stage, package,
    hardware, software, timing), its ``name``, the value in A and in B, and the line that says so."""

    kind: str
    name: str
    a: Any
    b: Any
    text: str


@dataclass(frozen=True)
class ReportDiff:
    changes: tuple[Change, ...]
    notes: tuple[str, ...]  # what could not be compared (an older report, a stage that did not run)


def _stage_facts(report: Report, stage: str) -> dict[str, Any] | None:
    for s in report.stages:
        if s.stage == stage:
            return s.facts
    return None


def installed_distributions(report: Report) -> dict[str, str] | None:
    """Every installed distribution (canonical name -> version) the packages stage recorded; None for a
    run without a packages stage or a report written before envbuild recorded the list."""
    facts = _stage_facts(report, "packages")
    if facts is None or not isinstance(facts.get("installed"), dict):
        return None
    return {canonicalize_name(str(k)): str(v) for k, v in facts["installed"].items()}


def _packages(report: Report) -> dict[str, Any]:
    """Declared and transitive distributions: the packages stage's ``installed``, with its
    ``declared_installed`` over it (canonical names; a declared package not installed is None)."""
    facts = _stage_facts(report, "packages") or {}
    out: dict[str, Any] = dict(installed_distributions(report) or {})
    for name, version in dict(facts.get("declared_installed", {})).items():
        out[canonicalize_name(str(name))] = version
    return out


def device_rows(report: Report) -> list[dict[str, Any]]:
    facts = _stage_facts(report, "devices") or {}
    return [d for d in facts.get("devices") or [] if isinstance(d, dict)]


def _devices(report: Report) -> list[str]:
    return [f"{d.get('name')} {d.get('arch')} {d.get('memory_gib')} GiB" for d in device_rows(report)]


def _fact(report: Report, stage: str, key: str) -> Any:
    return (_stage_facts(report, stage) or {}).get(key)


def _label(which: str, report: Report) -> str:
    return f"{which} ({report.run_id})"


def _package_changes(a: Report, b: Report) -> tuple[list[Change], list[str]]:
    notes: list[str] = []
    for which, r in (("A", a), ("B", b)):
        if _stage_facts(r, "packages") is None:
            notes.append(f"{_label(which, r)}: no packages stage in this run; its distributions are unknown")
        elif installed_distributions(r) is None:
            notes.append(
                f"{_label(which, r)}: report.json has no list of installed distributions (written by an "
                "envbuild that recorded only the declared packages): only the declared packages were compared"
            )
    pa, pb = _packages(a), _packages(b)
    if installed_distributions(a) is None or installed_distributions(b) is None:
        # one side knows only the declared packages: compare those, not "absent" for every other one
        pa = {k: v for k, v in pa.items() if k in _declared(a) or k in _declared(b)}
        pb = {k: v for k, v in pb.items() if k in _declared(a) or k in _declared(b)}
    out = [
        Change(
            "package",
            name,
            pa.get(name),
            pb.get(name),
            f"package {name}: {pa.get(name) or 'absent'} -> {pb.get(name) or 'absent'}",
        )
        for name in sorted(set(pa) | set(pb))
        if pa.get(name) != pb.get(name)
    ]
    return out, notes


def _declared(report: Report) -> set[str]:
    facts = _stage_facts(report, "packages") or {}
    return {canonicalize_name(str(n)) for n in dict(facts.get("declared_installed", {}))}


_DEVICE_FIELDS = ("name", "arch", "memory_gib", "sms", "uuid")


def _hardware_changes(a: Report, b: Report) -> list[Change]:
    out: list[Change] = []
    for key in ("machine", "cpus"):
        va, vb = a.host.get(key), b.host.get(key)
        if va is not None and vb is not None and va != vb:
            out.append(Change("hardware", f"host {key}", va, vb, f"host {key}: {va} -> {vb}"))
    da, db = device_rows(a), device_rows(b)
    if len(da) != len(db):
        out.append(
            Change(
                "hardware",
                "devices",
                _devices(a),
                _devices(b),
                f"devices: {_devices(a) or 'none'} -> {_devices(b) or 'none'}",
            )
        )
    for n, (ra, rb) in enumerate(zip(da, db, strict=False)):
        for key in _DEVICE_FIELDS:
            if key in ra and key in rb and ra[key] != rb[key]:  # uuid: absent from older reports
                out.append(
                    Change(
                        "hardware",
                        f"device {n} {key}",
                        ra[key],
                        rb[key],
                        f"device {n} {key}: {ra[key]} -> {rb[key]}",
                    )
                )
    for stage, key, label in (
        ("accelerator", "driver", "driver"),
        ("accelerator", "device_count", "devices torch sees"),
    ):
        va, vb = _fact(a, stage, key), _fact(b, stage, key)
        if va != vb:
            out.append(Change("hardware", label, va, vb, f"{label}: {va} -> {vb}"))
    for label, va, vb in hardware_differences(a.hardware, b.hardware):  # the live reading (issue 26)
        out.append(Change("hardware", label, va, vb, f"{label}: {va} -> {vb}"))
    return out


def _software_changes(a: Report, b: Report) -> list[Change]:
    out: list[Change] = []
    for stage, key, label in (
        ("accelerator", "torch_version", "torch"),
        ("accelerator", "torch_cuda", "torch CUDA"),
        ("accelerator", "torch_hip", "torch HIP"),
        ("interpreter", "version", "python"),
        ("os", "pretty_name", "os"),
        ("os", "libc_version", "glibc"),
    ):
        va, vb = _fact(a, stage, key), _fact(b, stage, key)
        if va != vb:
            out.append(Change("software", label, va, vb, f"{label}: {va} -> {vb}"))
    ka, kb = a.host.get("kernel"), b.host.get("kernel")
    if ka is not None and kb is not None and ka != kb:
        out.append(Change("software", "kernel", ka, kb, f"kernel: {ka} -> {kb}"))
    return out


def beyond_noise(a_s: float, b_s: float) -> bool:
    """Two durations of a stage differ beyond noise (:data:`TIMING_MIN_S` and :data:`TIMING_RATIO`)."""
    low, high = sorted((a_s, b_s))
    return high - low > TIMING_MIN_S and high > TIMING_RATIO * low


def _timing_changes(a: Report, b: Report) -> list[Change]:
    ran = ("passed", "failed", "timed_out")  # a skipped or aborted stage's 0 s says nothing
    ta = {s.stage: s.duration_s for s in a.stages if s.status in ran}
    tb = {s.stage: s.duration_s for s in b.stages if s.status in ran}
    return [
        Change(
            "timing",
            f"stage {stage} seconds",
            ta[stage],
            tb[stage],
            f"stage {stage} took {ta[stage]:.2f} s -> {tb[stage]:.2f} s",
        )
        for stage in ta
        if stage in tb and beyond_noise(ta[stage], tb[stage])
    ]


def compare_reports(a: Report, b: Report) -> ReportDiff:
    """Every difference: result, lock, stage statuses, every distribution (declared and transitive), the
    hardware (host CPUs, devices with their UUIDs, driver), interpreter/OS/torch, stage timings beyond
    noise; and a note for what could not be compared."""
    out: list[Change] = []
    if a.ok != b.ok:
        ra, rb = ("passed" if a.ok else "failed"), ("passed" if b.ok else "failed")
        out.append(Change("result", "result", ra, rb, f"result: {ra} -> {rb}"))
    if a.lock.sha256 != b.lock.sha256:
        out.append(
            Change(
                "lock",
                "lock",
                a.lock.sha256,
                b.lock.sha256,
                f"lock: {a.lock.sha256[:12]} -> {b.lock.sha256[:12]}",
            )
        )
    sa = {s.stage: s.status for s in a.stages}
    sb = {s.stage: s.status for s in b.stages}
    for stage in list(dict.fromkeys([*sa, *sb])):
        if sa.get(stage) != sb.get(stage):
            va, vb = sa.get(stage, "absent"), sb.get(stage, "absent")
            out.append(Change("stage", f"stage {stage}", va, vb, f"stage {stage}: {va} -> {vb}"))
    packages, notes = _package_changes(a, b)
    out += packages
    out += _hardware_changes(a, b)
    out += _software_changes(a, b)
    out += _timing_changes(a, b)
    return ReportDiff(tuple(out), tuple(notes))


def diff_reports(a: Report, b: Report) -> list[str]:
    """Human-readable differences (see :func:`compare_reports`), one line each."""
    return [c.text for c in compare_reports(a, b).changes]
