"""``report.html``: one self-contained page per run, for a person to read.

Inline CSS and SVG, the Blender renders as ``data:`` URIs, nothing loaded from anywhere; a
Content-Security-Policy meta tag (:data:`CSP`) allows no script and no fetch.  The page is rendered
from what report.json holds (already redacted by :func:`envbuild.report.write.write_report`), read
generically where other parts of envbuild add to it (a check's records, a stage's warnings), so a
new key shows up without a change here.

One way to make HTML, as for ``report fleet --html``: templates/report/report.html.j2, rendered with
envbuild's one Jinja environment (:func:`envbuild.templating.environment`) inside an
``{% autoescape true %}`` block, so every string from the machine is escaped by Jinja.  This module
only prepares plain data (strings, numbers, lists and the tagged views of :func:`view`), never markup.
The page is the template's output as it is (not :func:`~envbuild.templating.render_template`'s
normalised text), so a check's output tail keeps its blank lines and trailing spaces.

In reading order: the verdict and the first failure; the stage ladder with durations (an SVG bar
chart); package drift; the hardware facts; the checks with their assertions; the Blender renders.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import Any

from envbuild.report.markdown import PACKAGE_LISTS

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
TEMPLATE = "report/report.html.j2"

STATUS_COLOR = {
    "passed": "#2e7d32",
    "skipped": "#607d8b",
    "failed": "#c62828",
    "timed_out": "#c62828",
    "aborted": "#ef6c00",
}

BAR_W = 560
ROW_H = 24
LABEL_W = 110
TAIL_CHARS = 4000

View = dict[str, Any]  # {"kind": "text" | "table" | "rows" | "list", ...}: what the template's view() draws


# -- generic views of report.json's values ------------------------------------------------------------


def as_dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def stage_facts(data: Mapping[str, Any], name: str) -> dict[str, Any]:
    for s in data.get("stages") or []:
        if isinstance(s, dict) and s.get("stage") == name:
            facts = s.get("facts")
            return facts if isinstance(facts, dict) else {}
    return {}


def is_scalar(value: object) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def text_of(value: object) -> str:
    if isinstance(value, list) and all(is_scalar(v) for v in value):
        return " ".join(str(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return "" if value is None else str(value)


def rows(pairs: Iterable[tuple[str, object]]) -> list[tuple[str, str]]:
    """``(name, text)`` of the pairs that hold a value."""
    return [(str(k), text_of(v)) for k, v in pairs if v not in (None, "", [])]


def records_table(records: list[dict[str, Any]]) -> View:
    """A table of records (each a dict), one column per key any of them has, in first-seen order."""
    keys: list[str] = []
    for r in records:
        keys += [k for k in r if k not in keys]
    return {"kind": "table", "keys": keys, "rows": [[view(r.get(k)) for k in keys] for r in records]}


def view(value: object) -> View:
    """A value shown generically: scalars as text, a list of records as a table, a dict as rows."""
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return records_table(value)
    if isinstance(value, dict):
        return {"kind": "rows", "items": [(str(k), view(v)) for k, v in value.items()]}
    if isinstance(value, list) and not all(is_scalar(v) for v in value):
        return {"kind": "list", "items": [view(v) for v in value]}
    return {"kind": "text", "text": text_of(value)}


# -- sections -----------------------------------------------------------------------------------------


def _stages(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [s for s in data.get("stages") or [] if isinstance(s, dict)]


def verdict_section(data: Mapping[str, Any]) -> dict[str, Any]:
    ok = bool(data.get("ok"))
    word = "PASSED" if ok else "FAILED"
    if data.get("interrupted"):
        word += f" (interrupted by {data.get('signal')})"
    first = as_dict(data.get("first_failure"))
    failure = None
    if first:
        stage = next((s for s in _stages(data) if s.get("stage") == first.get("stage")), {})
        failure = {
            "stage": text_of(first.get("stage")),
            "error": text_of(first.get("error")),
            "hint": text_of(stage.get("hint")),
        }
    lock = as_dict(data.get("lock"))
    content = as_dict(lock.get("content"))
    meta = [
        ("lock", f"{lock.get('path')} (sha256 {str(lock.get('sha256', ''))[:16]}…)"),
        ("profile", content.get("profile_name")),
        ("interpreter", data.get("python")),
        ("workdir", data.get("workdir")),
        ("started", data.get("started_at")),
        ("duration", f"{float(data.get('duration_s') or 0):.1f} s"),
        ("stage reached", data.get("stage_reached") or "-"),
        ("envbuild", data.get("envbuild_version")),
    ]
    warnings = [
        (text_of(s.get("stage")), str(w))
        for s in _stages(data)
        if isinstance(s.get("facts"), dict)
        for w in s["facts"].get("warnings") or []
    ]
    return {
        "run_id": text_of(data.get("run_id")),
        "ok": ok,
        "word": word,
        "failure": failure,
        "meta": [(k, str(v)) for k, v in meta if v],
        "warnings": warnings,
    }


def ladder_section(data: Mapping[str, Any]) -> dict[str, Any] | None:
    """The stages in ladder order, each a bar as long as its duration, coloured by its status."""
    stages = _stages(data)
    if not stages:
        return None
    longest = max((float(s.get("duration_s") or 0) for s in stages), default=0.0) or 1.0
    bars = []
    for i, s in enumerate(stages):
        status = str(s.get("status"))
        secs = float(s.get("duration_s") or 0)
        y = 4 + i * ROW_H
        w = max(2.0, BAR_W * secs / longest)
        bars.append(
            {
                "stage": text_of(s.get("stage")),
                "status": status,
                "seconds": f"{secs:.2f}",
                "y": y,
                "width": f"{w:.1f}",
                "color": STATUS_COLOR.get(status, "#9e9e9e"),
                "text_x": f"{LABEL_W + w + 6:.1f}",
                "detail": text_of(s.get("error")) or text_of((s.get("facts") or {}).get("reason")),
                "hint": text_of(s.get("hint")),
            }
        )
    return {
        "bars": bars,
        "width": LABEL_W + BAR_W + 200,
        "height": ROW_H * len(stages) + 8,
        "label_w": LABEL_W,
        "bar_h": ROW_H - 8,
    }


def label_ok(facts: Mapping[str, Any]) -> str:
    if facts.get("lock_resolved"):
        return "the installed set matches the lock's resolved distributions."
    return "the installed distributions satisfy the lock's declared requirements."


def packages_section(data: Mapping[str, Any]) -> dict[str, Any] | None:
    """None without a packages stage; else its note, counts and lists (``drift``: a list that fails)."""
    facts = stage_facts(data, "packages")
    if not facts:
        return None
    counts = [
        f"{k.replace('_', ' ')}: {facts[k]}"
        for k in ("installed_count", "locked_count", "declared")
        if facts.get(k) not in (None, "", [])
    ]
    lists = []
    for key, _label, title in PACKAGE_LISTS:
        items = facts.get(key)
        if isinstance(items, list) and items:
            lists.append({"title": title, "items": [text_of(i) for i in items], "fails": key != "extras"})
    return {
        "note": text_of(facts.get("note")),
        "counts": "; ".join(counts),
        "lists": lists,
        "drift": any(entry["fails"] for entry in lists),
        "label_ok": label_ok(facts),
    }


def hardware_section(data: Mapping[str, Any]) -> dict[str, Any]:
    host = as_dict(data.get("host"))
    py, os_, acc = stage_facts(data, "interpreter"), stage_facts(data, "os"), stage_facts(data, "accelerator")
    mem = host.get("mem_available_bytes")
    facts = [
        ("hostname", host.get("hostname")),
        ("machine", host.get("machine")),
        ("kernel", host.get("kernel")),
        ("CPUs", host.get("cpus")),
        ("memory available", f"{mem / 2**30:.1f} GiB" if isinstance(mem, (int, float)) else None),
        ("os", os_.get("pretty_name")),
        ("glibc", os_.get("libc_version")),
        ("interpreter", py.get("executable")),
        ("python", py.get("version")),
        ("environment", f"{py.get('kind')} at {py.get('prefix')}" if py.get("kind") else None),
        ("torch", acc.get("torch_version")),
        ("torch CUDA / HIP", acc.get("torch_cuda") or acc.get("torch_hip")),
        ("driver", acc.get("driver")),
        ("GPUs torch sees", acc.get("device_count")),
    ]
    devices = [d for d in stage_facts(data, "devices").get("devices") or [] if isinstance(d, dict)]
    compute = [c for c in stage_facts(data, "compute").get("checks") or [] if isinstance(c, dict)]
    return {
        "facts": rows(facts),
        "devices": records_table(devices) if devices else None,
        "compute": records_table(compute) if compute else None,
    }


def checks_section(data: Mapping[str, Any]) -> dict[str, Any]:
    """Every check: its status and error, then each of its records generically (argv, exit status,
    seconds, assertions as a table, ...), the output tail last.  ``absent``: why there is no list."""
    facts = stage_facts(data, "checks")
    stage = next((s for s in _stages(data) if s.get("stage") == "checks"), None)
    if stage is None:
        return {"absent": "No checks stage in this run."}
    entries = [e for e in facts.get("checks") or [] if isinstance(e, dict)]
    if not entries:
        return {"absent": text_of(stage.get("error") or facts.get("reason") or stage.get("status"))}
    where = [("workdir", facts.get("workdir")), ("python", facts.get("python"))]
    checks = []
    for e in entries:
        checks.append(
            {
                "name": text_of(e.get("name")),
                "status": str(e.get("status")),
                "error": text_of(e.get("error")),
                "records": [
                    (str(k), view(v))
                    for k, v in e.items()
                    if k not in ("name", "status", "error", "output_tail") and v not in (None, "", [])
                ],
                "tail": str(e.get("output_tail") or "")[-TAIL_CHARS:],
            }
        )
    return {"absent": None, "where": rows(where), "checks": checks}


def blender_section(data: Mapping[str, Any], images: Mapping[str, bytes]) -> dict[str, Any] | None:
    facts = stage_facts(data, "blender")
    renders = [r for r in facts.get("renders") or [] if isinstance(r, dict)]
    if not renders and not facts.get("version"):
        return None
    figures = []
    for r in renders:
        name = r.get("image")
        png = images.get(str(name)) if name else None
        if png is None:
            continue
        caption = f"{r.get('device')}: {r.get('status')}, {r.get('render_s', '-')} s"
        if r.get("psnr_db") is not None:
            caption += f", PSNR {r.get('psnr_db')} dB vs CPU"
        figures.append(
            {
                "uri": "data:image/png;base64," + base64.b64encode(png).decode("ascii"),
                "alt": f"{r.get('device')} render",
                "caption": caption,
            }
        )
    return {
        "summary": f"Blender {facts.get('version_string') or facts.get('version')} ({facts.get('mode')})",
        "renders": records_table(renders) if renders else None,
        "figures": figures,
    }


def render_html(data: Mapping[str, Any], images: Mapping[str, bytes]) -> str:
    """The page for one run: ``data`` is report.json's content, ``images`` the run's PNGs by name."""
    from envbuild.templating import environment

    verdict = verdict_section(data)
    page = (
        environment()
        .get_template(TEMPLATE)
        .render(
            csp=CSP,
            title=f"{'PASSED' if verdict['ok'] else 'FAILED'} — envbuild report {verdict['run_id']}",
            verdict=verdict,
            ladder=ladder_section(data),
            packages=packages_section(data),
            hardware=hardware_section(data),
            checks=checks_section(data),
            blender=blender_section(data, images),
        )
    )
    return str(page)
