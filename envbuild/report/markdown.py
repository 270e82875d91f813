"""``report.md``: the run for a person reading it in a terminal or a review (:func:`render_markdown`),
and the views of a report the other formats share (:func:`check_entries`, :func:`output_tail`,
:func:`stage_warnings`, :func:`key_facts`).

Every string of the report reaches the page through :mod:`envbuild.untrusted` (:func:`_md`, text;
:func:`_code`, a code span; ``markdown_block``, the output tails): a machine's, a check's or a peer's
text is shown as text, never read as Markdown or HTML nor run as a terminal escape (issue 36)."""

from __future__ import annotations

import json
import re
from typing import Any

from envbuild.report.hardware import hardware_section
from envbuild.report.model import Report
from envbuild.report.redact import redact_text
from envbuild.untrusted import markdown, markdown_block, markdown_code

PYTHON_ON_PATH = "`python` on PATH"  # key_facts' one label with Markdown of its own


def render_markdown(report: Report) -> str:
    lines = [
        f"# envbuild validation report {_code(report.run_id)}",
        "",
        f"- result: **{'PASSED' if report.ok else 'FAILED'}**"
        + (" (interrupted)" if report.interrupted else ""),
        f"- lock: {_code(report.lock.path)} (sha256 {_code(report.lock.sha256[:16] + '…')}, profile "
        f"{_code(report.lock.content.get('profile_name'))})",
        f"- interpreter: {_code(report.python)}; workdir {_code(report.workdir)}",
        f"- started {_md(report.started_at)}, {report.duration_s:.1f} s; "
        f"envbuild {_md(report.envbuild_version)}",
        f"- stage reached: {_md(report.stage_reached or '-')}",
    ]
    if report.first_failure:
        lines.append(
            f"- first failure: **{_md(report.first_failure.stage)}**: {_md(report.first_failure.error)}"
        )
    lines += ["", "| stage | status | seconds | detail |", "|---|---|---|---|"]
    for s in report.stages:
        detail = s.error or str(s.facts.get("reason", ""))
        warned = [str(w) for w in s.facts.get("warnings") or []]
        if s.hint and warned and s.hint == "; ".join(warned):  # listed whole under ## Warnings
            detail += (
                f"{' — ' if detail else ''}{len(warned)} warning{'s' if len(warned) > 1 else ''} (below)"
            )
        elif s.hint:
            detail += f" — hint: {s.hint}" if detail else f"hint: {s.hint}"
        lines.append(f"| {_md(s.stage)} | {_md(s.status)} | {s.duration_s:.2f} | {_md(detail)} |")
    lines += warnings_section(report)
    lines += ["", "## Key facts", ""]
    lines += [
        f"- {label if label == PYTHON_ON_PATH else _md(label)}: {_md(value)}"
        for label, value in key_facts(report)
        if value not in (None, "", [])
    ]
    lines += hardware_section(report.hardware)
    lines += blender_section(report)
    lines += packages_section(report)
    lines += checks_section(report)
    lines.append("")
    return "\n".join(lines)


# (fact key, short label, heading) of the packages stage's lists, in reading order; extras never fail.
PACKAGE_LISTS = (
    ("missing", "missing", "Missing (locked, not installed)"),
    ("different", "different version", "Different version"),
    ("wrong_variant", "wrong variant", "Wrong variant (the local tag differs)"),
    ("differences", "differences", "Differences from the declared requirements"),
    ("broken", "broken requirements", "Broken requirements"),
    (
        "broken_unlocked",
        "broken outside the lock",
        "Broken requirements the lock neither names nor needs (not failing)",
    ),
    ("extras", "extras", "Extras (installed, not in the lock; listed, never a failure)"),
)


def packages_section(report: Report) -> list[str]:
    """``## Packages``: what the stage compared, the "lock not resolved" note, and each list.

    Empty for a report without a packages stage, or one whose packages facts predate these lists.
    """
    facts = next((s.facts for s in report.stages if s.stage == "packages"), {})
    if "lock_resolved" not in facts:
        return []
    installed = facts.get("installed_count")
    keys: tuple[str, ...]
    if facts["lock_resolved"]:
        compared = (
            f"Compared the whole installed set ({installed} distributions) with the lock's "
            f"{facts.get('locked_count')} resolved distributions"
        )
        keys = ("missing", "different", "wrong_variant", "broken", "broken_unlocked", "extras")
    else:
        compared = (
            f"Compared the lock's declared requirements ({facts.get('declared')}) with the "
            f"{installed} installed distributions"
        )
        keys = ("differences", "broken", "broken_unlocked")
    lists = [
        (label, title, list(facts.get(key) or []))
        for key, label, title in PACKAGE_LISTS
        if key in keys and (key != "broken_unlocked" or facts.get(key))  # counted only when present
    ]
    out = ["", "## Packages", ""]
    if facts.get("note"):
        out += [f"> **Note:** {_md(facts['note'])}", ""]
    out.append(f"{compared}: " + ", ".join(f"{label} {len(items)}" for label, _, items in lists) + ".")
    for _, title, items in lists:
        if items:
            out += ["", f"**{title}** ({len(items)}):", ""]
            out += [f"- {_md(item)}" for item in items]
    return out


def blender_section(report: Report) -> list[str]:
    """``## Blender``: the version, Cycles' devices per type, each render with its time, PSNR and picture."""
    facts = next((s.facts for s in report.stages if s.stage == "blender"), {})
    if not facts.get("renders") and not facts.get("version"):
        return []
    out = ["", "## Blender", ""]
    out.append(
        _md(
            f"Blender {facts.get('version_string') or facts.get('version')} ({facts.get('mode')}, locked "
            f"{facts.get('locked_version')}); import {facts.get('import_s')} s. Declared devices: "
            + ", ".join(str(d) for d in facts.get("declared") or [])
            + "."
        )
    )
    devices = facts.get("devices") or {}
    compiled = facts.get("compiled") or {}
    seen = [
        f"{kind} {len(names)} ({', '.join(str(n) for n in names)})"
        if names
        else f"{kind} 0{'' if compiled.get(kind, kind == 'CPU') else ' (not in this build)'}"
        for kind, names in devices.items()
    ]
    if seen:
        out += ["", "Cycles devices Blender sees: " + _md("; ".join(seen)) + "."]
    scene = facts.get("scene") or {}
    if scene:
        out += [
            "",
            _md(
                f"Scene: the factory startup scene, {scene.get('size')}x{scene.get('size')} pixels, "
                f"{scene.get('samples')} samples, seed {scene.get('seed')}, no denoising; a GPU render "
                f"passes with PSNR >= {facts.get('psnr_min_db')} dB against the CPU render."
            ),
        ]
    out += ["", "| device | status | render s | PSNR vs CPU (dB) | image |", "|---|---|---|---|---|"]
    for r in facts.get("renders") or []:
        image = r.get("image")
        link = f"[{_md(image)}]({_target(image)})" if _target(image) else _md(image or "-")
        psnr = r.get("psnr_db", "-" if r.get("device") != "CPU" else "reference")
        cells = (r.get("device"), r.get("status"), r.get("render_s", "-"), psnr)
        out.append("| " + " | ".join(_md(c) for c in cells) + f" | {link} |")
    for r in facts.get("renders") or []:
        if _target(r.get("image")):
            out += ["", f"![{_md(r.get('device'))} render]({_target(r.get('image'))})"]
    return out


_PICTURE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\.png$")


def _target(image: object) -> str | None:
    """A render's picture as a link target: a plain file name beside report.md (the validator writes
    ``render-DEVICE.png``), else None (the name is then shown as text, not linked)."""
    return image if isinstance(image, str) and _PICTURE.match(image) else None


TAIL_LINES = 40
TAIL_CHARS = 4000


def output_tail(text: str, lines: int = TAIL_LINES, chars: int = TAIL_CHARS) -> str:
    """The last ``lines`` lines of ``text``, at most ``chars`` characters, redacted before the cut and
    again after it."""
    tail = "\n".join(redact_text(text).rstrip("\n").splitlines()[-lines:])[-chars:]
    return redact_text(tail)


def check_entries(report: Report) -> list[dict[str, Any]]:
    """The checks stage's entries (one per check that ran), in the order they ran."""
    facts = next((s.facts for s in report.stages if s.stage == "checks"), {})
    return [e for e in facts.get("checks") or [] if isinstance(e, dict)]


def _value(value: object) -> str:
    return "-" if value is None else _md(value if isinstance(value, str) else json.dumps(value))


def _md(text: object) -> str:
    """Text of the report, as one line of Markdown that reads as the text."""
    return markdown(text)


def _code(text: object, in_table: bool = False) -> str:
    """Text of the report as a code span."""
    return markdown_code(text, in_table=in_table)


def checks_section(report: Report) -> list[str]:
    """``## Checks``: every check that ran (status, exit, seconds, stragglers, argv) and every assertion
    (expected, actual); then each check that did not pass: its error and output tail before its argv."""
    facts = next((s.facts for s in report.stages if s.stage == "checks"), {})
    entries = check_entries(report)
    if not entries:
        return []
    out = ["", "## Checks", ""]
    if facts.get("python"):
        out += [
            f"Run in {_code(facts.get('workdir'))} with {_code(facts['python'])} (its folder first on PATH).",
            "",
        ]
    out += [
        "| check | status | exit | seconds | stragglers killed | command |",
        "|---|---|---|---|---|---|",
    ]
    for e in entries:
        argv = " ".join(str(a) for a in e.get("argv") or [])
        out.append(
            f"| {_md(e.get('name'))} | {_md(e.get('status'))} | {_value(e.get('returncode'))} | "
            f"{_value(e.get('seconds'))} | {_value(e.get('stragglers_killed'))} | "
            f"{_code(argv, in_table=True)} |"
        )
    rows = [(e, a) for e in entries for a in e.get("assertions") or [] if isinstance(a, dict)]
    if rows:
        out += ["", "| check | assertion | expected | actual | result |", "|---|---|---|---|---|"]
        for e, a in rows:
            what = (
                "exit status"
                if a.get("kind") == "exit"
                else f"{_md(a.get('kind'))} {_code(a.get('target'), in_table=True)}"
            )
            verdict = "ok" if a.get("ok") else f"**failed**: {_md(a.get('error', ''))}"
            out.append(
                f"| {_md(e.get('name'))} | {what} | {_value(a.get('expected'))} | "
                f"{_value(a.get('actual'))} | {verdict} |"
            )
    for entry in (e for e in entries if e.get("status") != "passed"):
        argv = " ".join(str(a) for a in entry.get("argv") or [])
        out += ["", f"### {_code(entry.get('name'))}: {_md(entry.get('status'))}", ""]
        out += [f"- error: {_md(entry.get('error', ''))}"]
        if entry.get("returncode") is not None:
            out.append(f"- exit status: {_md(entry['returncode'])}")
        tail = output_tail(str(entry.get("output_tail") or ""))
        if tail.strip():
            out += ["", f"Output (last {TAIL_LINES} lines at most):", "", *markdown_block(tail), ""]
        else:
            out += ["", "No output.", ""]
        out.append(f"- command: {_code(argv)}")
    return out


def stage_warnings(report: Report) -> list[tuple[str, str]]:
    """(stage, warning) for every warning of the run (a stage's ``warnings`` fact), in ladder order."""
    return [
        (s.stage, str(w)) for s in report.stages for w in s.facts.get("warnings") or [] if isinstance(w, str)
    ]


def warnings_section(report: Report) -> list[str]:
    found = stage_warnings(report)
    if not found:
        return []
    return ["", "## Warnings", "", *(f"- **{_md(stage)}**: {_md(text)}" for stage, text in found)]


def key_facts(report: Report) -> list[tuple[str, object]]:
    """The facts a reviewer of a copied report needs first, in reading order."""
    f = {s.stage: s.facts for s in report.stages}
    py = f.get("interpreter", {})
    out: list[tuple[str, object]] = [
        ("interpreter", py.get("executable")),
        ("python", py.get("version")),
        ("environment", _environment(py)),
        (PYTHON_ON_PATH, _on_path(py)),
        ("os", f.get("os", {}).get("pretty_name")),
        ("glibc", f.get("os", {}).get("libc_version")),
        ("torch", f.get("accelerator", {}).get("torch_version")),
        (
            "torch CUDA / HIP",
            f.get("accelerator", {}).get("torch_cuda") or f.get("accelerator", {}).get("torch_hip"),
        ),
        ("driver", f.get("accelerator", {}).get("driver")),
    ]
    for dev in f.get("devices", {}).get("devices", []):
        out.append(
            (
                f"device {dev.get('index')}",
                f"{dev.get('name')}, {dev.get('arch')}, {dev.get('memory_gib')} GiB",
            )
        )
    for c in f.get("compute", {}).get("checks", []):
        out.append(
            (
                f"matmul {c.get('device')} {c.get('dtype')}",
                f"rel. error {c.get('rel_error')}, {c.get('gflops')} GFLOP/s",
            )
        )
    ck = f.get("checkpoint", {})
    if ck.get("size_bytes"):
        out.append(
            (
                "checkpoint",
                f"{ck['size_bytes']} bytes, write {ck.get('write_seconds')} s, "
                f"read {ck.get('read_seconds')} s",
            )
        )
    return out


def _environment(py: dict[str, object]) -> str | None:
    if not py.get("kind"):
        return None
    chosen = f", chosen by {py['chosen_by']}" if py.get("chosen_by") else ""
    return f"{py['kind']} at {py.get('prefix')}{chosen}"


def _on_path(py: dict[str, object]) -> str | None:
    seen = py.get("on_path")
    if not isinstance(seen, dict) or not isinstance(seen.get("python"), dict):
        return None
    first = seen["python"]
    if not first.get("path"):
        return "none"
    same = "the interpreter under test" if first.get("is_under_test") else "NOT the interpreter under test"
    return f"{first['path']} ({same})"
