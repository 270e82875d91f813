"""``junit.xml``: one testcase per stage, per check and per assertion, for a CI's test view."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from envbuild.report.markdown import check_entries, output_tail
from envbuild.report.model import Report
from envbuild.untrusted import terminal


def _junit_case(
    suite: ET.Element,
    classname: str,
    name: str,
    seconds: object,
    status: str,
    message: str,
    text: str = "",
    warnings: list[str] | None = None,
) -> None:
    time_s = f"{float(seconds):.3f}" if isinstance(seconds, (int, float)) else "0.000"
    case = ET.SubElement(suite, "testcase", classname=classname, name=name, time=time_s)
    if status in ("failed", "timed_out"):
        el = ET.SubElement(case, "failure", message=message, type=status)
        el.text = message + (f"\n{text}" if text else "")
    elif status in ("skipped", "aborted"):
        ET.SubElement(case, "skipped", message=f"{status}: {message}")
    if warnings:
        ET.SubElement(case, "system-out").text = "".join(f"warning: {w}\n" for w in warnings)


def _visible(element: ET.Element) -> None:
    """Every text and attribute with its control characters as escapes (``\n`` kept in text): they are
    the machine's (XML 1.0 cannot hold most of them, and a CI's view would print them)."""
    for el in element.iter():
        el.attrib.update({k: terminal(v) for k, v in el.attrib.items()})
        if el.text:
            el.text = terminal(el.text, multiline=True)


def render_junit(report: Report) -> str:
    """One testcase per stage, per check (classname ``envbuild.validate.checks``) and per assertion of a
    check (classname ``envbuild.validate.checks.<check>``); a warning is a ``warning:`` line in its
    testcase's system-out."""
    suite = ET.Element("testsuite", name="envbuild.validate")
    for s in report.stages:
        message = s.error or str(s.facts.get("reason", "")) or s.status
        warned = [str(w) for w in s.facts.get("warnings") or []]
        _junit_case(
            suite,
            "envbuild.validate",
            s.stage,
            s.duration_s,
            s.status,
            message,
            f"hint: {s.hint}" if s.hint else "",
            [] if s.stage == "checks" else warned,  # the checks' own warnings go with each check
        )
    for e in check_entries(report):
        name, status = str(e.get("name")), str(e.get("status"))
        argv = " ".join(str(a) for a in e.get("argv") or [])
        tail = output_tail(str(e.get("output_tail") or ""))
        text = (
            f"exit status: {e.get('returncode')}\n"
            + (f"output:\n{tail}\n" if tail else "")
            + f"command: {argv}"
        )
        warned = (
            [f"left {e['stragglers_killed']} process(es) behind, killed"]
            if e.get("stragglers_killed")
            else []
        )
        _junit_case(
            suite,
            "envbuild.validate.checks",
            name,
            e.get("seconds"),
            status,
            str(e.get("error") or status),
            text,
            warned,
        )
        for a in e.get("assertions") or []:
            what = "exit status" if a.get("kind") == "exit" else f"{a.get('kind')} {a.get('target')}"
            expected, actual = json.dumps(a.get("expected")), json.dumps(a.get("actual"))
            _junit_case(
                suite,
                f"envbuild.validate.checks.{name}",
                what,
                0,
                "passed" if a.get("ok") else "failed",
                str(a.get("error") or "ok"),
                f"expected {expected}, actual {actual}",
            )
    cases = suite.findall("testcase")
    suite.attrib.update(
        tests=str(len(cases)),
        failures=str(sum(1 for c in cases if c.find("failure") is not None)),
        errors="0",
        skipped=str(sum(1 for c in cases if c.find("skipped") is not None)),
        time=f"{report.duration_s:.3f}",
        timestamp=report.started_at,
    )
    _visible(suite)
    ET.indent(suite)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
