"""report.json's ``hardware`` section (:mod:`envbuild.validate.hardware_stage`) for people: report.md's
``## Hardware`` (:func:`hardware_section`), what ``report diff`` compares (:func:`hardware_differences`)
and the one-line verdict ``report fleet`` shows per lot (:func:`hardware_summary`).

The section is read as plain JSON data (a report copied from elsewhere, or written by an older
envbuild without it): every key is optional.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from envbuild.untrusted import markdown, markdown_code

Section = dict[str, Any]


def _md(text: object) -> str:
    return markdown(text)  # a capture's text: escaped for Markdown, control characters shown


def _gib(mib: object) -> str | None:
    return f"{float(mib) / 1024:.1f} GiB" if isinstance(mib, (int, float)) else None


def _pcie(dev: dict[str, Any]) -> str | None:
    p = dev.get("pcie") or {}
    if p.get("gen_current") is None and p.get("width_current") is None:
        return None
    return (
        f"gen {p.get('gen_current', '?')}/{p.get('gen_max', '?')} "
        f"x{p.get('width_current', '?')}/x{p.get('width_max', '?')}"
    )


def _mig(dev: dict[str, Any]) -> str | None:
    mode = dev.get("mig_mode")
    parts = [p for p in (dev.get("compute_partition"), dev.get("memory_partition")) if p]
    if mode is None and not parts:
        return None
    shown = str(mode) if mode is not None else ""
    if mode == "Enabled" and dev.get("mig_devices") is not None:
        shown += f" ({dev['mig_devices']} instances)"
    return " ".join([shown, "/".join(parts)]).strip()


def _ecc(dev: dict[str, Any]) -> str | None:
    e = dev.get("ecc") or {}
    keys = ("volatile_uncorrectable", "aggregate_uncorrectable", "volatile_correctable")
    if all(e.get(k) is None for k in keys):
        return e.get("mode_current")
    return (
        f"uncorrectable {e.get('volatile_uncorrectable', '-')}/{e.get('aggregate_uncorrectable', '-')}, "
        f"correctable {e.get('volatile_correctable', '-')}"
    )


def _power(dev: dict[str, Any]) -> str | None:
    cur, default = dev.get("power_limit_w"), dev.get("default_power_limit_w")
    if cur is None:
        return None
    return f"{cur:g} W" + (f" (default {default:g} W)" if isinstance(default, (int, float)) else "")


# (label, how a device's fact reads): the per-device facts report.md lists and report diff compares.
DEVICE_FACTS: tuple[tuple[str, Callable[[dict[str, Any]], object]], ...] = (
    ("name", lambda d: d.get("name")),
    ("PCI id", lambda d: d.get("pci_device_id")),
    ("memory", lambda d: _gib(d.get("memory_total_mib"))),
    ("MIG / partition", _mig),
    ("ECC", _ecc),
    ("PCIe link", _pcie),
    ("power limit", _power),
)


def _devices(hw: Section) -> list[dict[str, Any]]:
    facts = hw.get("facts") or {}
    return [d for d in facts.get("devices") or [] if isinstance(d, dict)]


def hardware_section(hw: Section | None) -> list[str]:
    """``## Hardware``: the source, each device's facts, each rule's verdict, the findings."""
    if not hw:
        return []
    out = ["", "## Hardware", ""]
    facts = hw.get("facts")
    if not facts:
        out.append(f"No vendor tool answered (tried: {_md(hw.get('tried'))}): the hardware was not judged.")
        return out
    driver = facts.get("driver_version")
    runtime = facts.get("runtime_version")
    out.append(
        f"Read from {markdown_code(hw.get('source'))}"
        + (f", driver {_md(driver)}" if driver else "")
        + (f", runtime {_md(runtime)}" if runtime else "")
        + "."
    )
    out += ["", "| device | " + " | ".join(label for label, _ in DEVICE_FACTS) + " |"]
    out.append("|---" * (len(DEVICE_FACTS) + 1) + "|")
    for dev in _devices(hw):
        cells = [_md(v) if (v := get(dev)) is not None else "-" for _, get in DEVICE_FACTS]
        out.append(f"| {_md(dev.get('index'))} | " + " | ".join(cells) + " |")
    out += ["", "| rule | verdict | findings / not judged |", "|---|---|---|"]
    for v in hw.get("verdicts") or []:
        verdict = str(v.get("verdict"))
        shown = f"**{verdict}**" if verdict in ("error", "warning") else _md(verdict)
        detail = ", ".join(map(str, v.get("codes") or [])) or "; ".join(map(str, v.get("why") or [])) or "-"
        out.append(f"| {_md(v.get('rule'))} | {shown} | {_md(detail)} |")
    findings = [f for f in hw.get("findings") or [] if f.get("severity") != "info"]
    if findings:
        out.append("")
        out += [
            f"- {_md(f.get('severity'))}: {markdown_code(f.get('code'))}: {_md(f.get('message'))}"
            for f in findings
        ]
    return out


def hardware_differences(a: Section | None, b: Section | None) -> list[tuple[str, object, object]]:
    """(what, A, B) for each hardware fact that differs: the source, the driver, each device's facts
    (matched by index), each rule's verdict.  Empty when either run has no hardware section."""
    if not a or not b:
        return []
    out: list[tuple[str, object, object]] = []
    if a.get("source") != b.get("source"):
        out.append(("hardware source", a.get("source"), b.get("source")))
    fa, fb = a.get("facts") or {}, b.get("facts") or {}
    if fa.get("driver_version") != fb.get("driver_version"):
        out.append(("hardware driver", fa.get("driver_version"), fb.get("driver_version")))
    da, db = _devices(a), _devices(b)
    if len(da) != len(db):
        out.append(("hardware devices", len(da), len(db)))
    for n, (ra, rb) in enumerate(zip(da, db, strict=False)):
        for label, get in DEVICE_FACTS:
            va, vb = get(ra), get(rb)
            if va != vb:
                out.append((f"hardware device {n} {label}", va, vb))
    va = {str(v.get("rule")): v.get("verdict") for v in a.get("verdicts") or []}
    vb = {str(v.get("rule")): v.get("verdict") for v in b.get("verdicts") or []}
    for rule in dict.fromkeys([*va, *vb]):
        if va.get(rule) != vb.get(rule):
            out.append((f"hardware rule {rule}", va.get(rule), vb.get(rule)))
    return out


def hardware_summary(hw: Section | None) -> str | None:
    """``"ok"``, ``"E-HW-MIG, W-HW-PCIE-WIDTH"`` or ``"not judged (no vendor tool)"``; None: no section."""
    if not hw:
        return None
    if not hw.get("facts"):
        return "not judged (no vendor tool)"
    codes = [str(f.get("code")) for f in hw.get("findings") or [] if f.get("severity") != "info"]
    return ", ".join(dict.fromkeys(codes)) or "ok"
