"""``report.html``: one self-contained page per run, for a person to read.

Inline CSS and SVG, the Blender renders as ``data:`` URIs, nothing loaded from anywhere; a
Content-Security-Policy meta tag (:data:`CSP`) allows no script and no fetch.  The page is rendered
from what report.json holds (already redacted by :func:`envbuild.validate.report.write_report`), read
generically where other parts of envbuild add to it (a check's records, a stage's warnings), so a
new key shows up without a change here.

Every string from the machine goes through :func:`html.escape`: the page is built with
:func:`envbuild.validate.html_build.el`, which escapes every child and attribute value that is not markup it
made (:class:`~envbuild.validate.html_build.Markup`).

In reading order: the verdict and the first failure; the stage ladder with durations (an SVG bar
chart); package drift; the hardware facts; the checks with their assertions; the Blender renders.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from envbuild.validate.html_build import (
    Markup,
    as_dict,
    el,
    esc,
    records_table,
    rows,
    stage_facts,
    text_of,
    value_view,
)

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

STATUS_COLOR = {
    "passed": "#2e7d32",
    "skipped": "#607d8b",
    "failed": "#c62828",
    "timed_out": "#c62828",
    "aborted": "#ef6c00",
}

STYLE = """
body{font:14px/1.45 system-ui,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d1d1f;background:#fafafa}
main{max-width:1100px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:20px;margin:8px 0}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:15px;margin:16px 0 6px}
.verdict{padding:14px 18px;border-radius:6px;color:#fff;font-size:18px}
.verdict.passed{background:#2e7d32}.verdict.failed{background:#c62828}
.verdict>strong{font-size:22px;letter-spacing:.04em;margin-right:10px}
.first-failure{margin-top:6px;font-size:15px}
.meta{color:#555;margin:8px 0}
table{border-collapse:collapse;margin:6px 0;background:#fff}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f0}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
pre{background:#1e1e1e;color:#eee;padding:8px 10px;overflow:auto;max-height:360px;white-space:pre-wrap}
.status{font-weight:600}
.passed .status,.st-passed{color:#2e7d32}.st-failed,.st-timed_out{color:#c62828}
.st-aborted{color:#ef6c00}.st-skipped{color:#607d8b}
.warn{background:#fff3e0;border-left:4px solid #ef6c00;padding:6px 10px;margin:6px 0}
.note{color:#555}
figure{display:inline-block;margin:8px 16px 8px 0}figure img{border:1px solid #ccc;image-rendering:pixelated}
svg text{font-size:12px;font-family:system-ui,sans-serif}
details{margin:6px 0}
"""


# -- sections -----------------------------------------------------------------------------------------


def verdict_section(data: Mapping[str, Any]) -> Markup:
    ok = bool(data.get("ok"))
    word = "PASSED" if ok else "FAILED"
    if data.get("interrupted"):
        word += f" (interrupted by {data.get('signal')})"
    first = as_dict(data.get("first_failure"))
    failure = None
    if first:
        stage = next(
            (
                s
                for s in data.get("stages") or []
                if isinstance(s, dict) and s.get("stage") == first.get("stage")
            ),
            {},
        )
        failure = el(
            "div",
            "first failure: ",
            el("strong", first.get("stage")),
            ": ",
            el("span", first.get("error"), id="first-failure-error"),
            el("div", "hint: ", stage.get("hint")) if stage.get("hint") else None,
            class_="first-failure",
            id="first-failure",
        )
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
        (s.get("stage"), w)
        for s in data.get("stages") or []
        if isinstance(s, dict) and isinstance(s.get("facts"), dict)
        for w in s["facts"].get("warnings") or []
    ]
    return Markup(
        el("h1", "envbuild validation report ", el("code", data.get("run_id")))
        + el(
            "div",
            el("strong", word, id="verdict-word"),
            failure,
            class_=f"verdict {'passed' if ok else 'failed'}",
            id="verdict",
        )
        + el("div", [el("div", el("b", k), ": ", v) for k, v in meta if v], class_="meta")
        + Markup("".join(el("div", el("b", stage), ": warning: ", w, class_="warn") for stage, w in warnings))
    )


BAR_W = 560
ROW_H = 24
LABEL_W = 110


def ladder_section(data: Mapping[str, Any]) -> Markup:
    """The stages in ladder order, each a bar as long as its duration, coloured by its status."""
    stages = [s for s in data.get("stages") or [] if isinstance(s, dict)]
    if not stages:
        return Markup()
    longest = max((float(s.get("duration_s") or 0) for s in stages), default=0.0) or 1.0
    height = ROW_H * len(stages) + 8
    width = LABEL_W + BAR_W + 200
    rows = []
    for i, s in enumerate(stages):
        status = str(s.get("status"))
        secs = float(s.get("duration_s") or 0)
        y = 4 + i * ROW_H
        w = max(2.0, BAR_W * secs / longest)
        rows.append(
            el(
                "g",
                el("title", f"{s.get('stage')}: {status}, {secs:.2f} s"),
                el("text", s.get("stage"), x=LABEL_W - 6, y=y + 15, text_anchor="end"),
                el(
                    "rect",
                    x=LABEL_W,
                    y=y + 3,
                    width=f"{w:.1f}",
                    height=ROW_H - 8,
                    rx=2,
                    fill=STATUS_COLOR.get(status, "#9e9e9e"),
                ),
                el("text", f"{secs:.2f} s  {status}", x=f"{LABEL_W + w + 6:.1f}", y=y + 15),
            )
        )
    svg = el(
        "svg",
        el("title", "stage durations"),
        rows,
        xmlns="http://www.w3.org/2000/svg",
        width=width,
        height=height,
        viewBox=f"0 0 {width} {height}",
        role="img",
        aria_label="stage durations",
        id="ladder",
    )
    table = el(
        "table",
        el("tr", el("th", "stage"), el("th", "status"), el("th", "seconds"), el("th", "detail")),
        [
            el(
                "tr",
                el("td", s.get("stage")),
                el("td", s.get("status"), class_=f"status st-{s.get('status')}"),
                el("td", f"{float(s.get('duration_s') or 0):.2f}"),
                el(
                    "td",
                    s.get("error") or text_of((s.get("facts") or {}).get("reason")),
                    el("div", "hint: ", s.get("hint"), class_="note") if s.get("hint") else None,
                ),
            )
            for s in stages
        ],
    )
    note = el(
        "p",
        "Some stages run beside the ladder (the extension build, the checks), so bars overlap in time.",
        class_="note",
    )
    return Markup(el("h2", "Stages", id="stages") + svg + note + table)


def packages_section(data: Mapping[str, Any]) -> Markup:
    from envbuild.validate.markdown_report import _PACKAGE_LISTS

    facts = stage_facts(data, "packages")
    if not facts:
        return Markup(el("h2", "Package drift", id="packages") + el("p", "No packages stage in this run."))
    counts = [
        f"{k.replace('_', ' ')}: {facts[k]}"
        for k in ("installed_count", "locked_count", "declared")
        if facts.get(k) not in (None, "", [])
    ]
    body: list[Markup] = []
    if facts.get("note"):
        body.append(el("div", el("b", "Note: "), facts["note"], class_="warn"))
    if counts:
        body.append(el("p", "; ".join(counts)))
    drift = False
    for key, _label, title in _PACKAGE_LISTS:
        items = facts.get(key)
        if not isinstance(items, list) or not items:
            continue
        lis = el("ul", [el("li", el("code", text_of(item))) for item in items])
        if key == "extras":  # listed, never a failure
            body.append(el("details", el("summary", f"{title} ({len(items)})"), lis))
        else:
            drift = True
            body.append(Markup(el("h3", f"{title} ({len(items)})", class_="st-failed") + lis))
    if not drift:
        body.append(el("p", f"No drift: {label_ok(facts)}", class_="st-passed"))
    return Markup(el("h2", "Package drift", id="packages") + Markup("".join(body)))


def label_ok(facts: Mapping[str, Any]) -> str:
    if facts.get("lock_resolved"):
        return "the installed set matches the lock's resolved distributions."
    return "the installed distributions satisfy the lock's declared requirements."


def hardware_section(data: Mapping[str, Any]) -> Markup:
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
    out = el("h2", "Hardware", id="hardware") + el("table", rows(facts))
    devices = [d for d in stage_facts(data, "devices").get("devices") or [] if isinstance(d, dict)]
    if devices:
        out += el("h3", "Devices") + records_table(devices)
    compute = [c for c in stage_facts(data, "compute").get("checks") or [] if isinstance(c, dict)]
    if compute:
        out += el("h3", "Matmul against a float64 reference") + records_table(compute)
    return Markup(out)


TAIL_CHARS = 4000


def checks_section(data: Mapping[str, Any]) -> Markup:
    """Every check: its status and error, then each of its records generically (argv, exit status,
    seconds, assertions as a table, ...), the output tail last."""
    facts = stage_facts(data, "checks")
    stage = next(
        (s for s in data.get("stages") or [] if isinstance(s, dict) and s.get("stage") == "checks"), None
    )
    head = el("h2", "Checks", id="checks")
    if stage is None:
        return Markup(head + el("p", "No checks stage in this run."))
    entries = [e for e in facts.get("checks") or [] if isinstance(e, dict)]
    if not entries:
        why = stage.get("error") or facts.get("reason") or stage.get("status")
        return Markup(head + el("p", text_of(why)))
    out = [head]
    where = [("workdir", facts.get("workdir")), ("python", facts.get("python"))]
    if any(v for _, v in where):
        out.append(el("table", rows(where)))
    for e in entries:
        status = str(e.get("status"))
        records = [
            el("tr", el("th", k), el("td", value_view(v)))
            for k, v in e.items()
            if k not in ("name", "status", "error", "output_tail") and v not in (None, "", [])
        ]
        tail = str(e.get("output_tail") or "")[-TAIL_CHARS:]
        out.append(
            el(
                "section",
                el("h3", el("code", e.get("name")), ": ", el("span", status, class_=f"st-{status}")),
                el("div", e.get("error"), class_="warn") if e.get("error") else None,
                el("table", records),
                el("details", el("summary", "output (last lines)"), el("pre", tail))
                if tail.strip()
                else None,
                class_="check",
            )
        )
    return Markup("".join(out))


def blender_section(data: Mapping[str, Any], images: Mapping[str, bytes]) -> Markup:
    facts = stage_facts(data, "blender")
    renders = [r for r in facts.get("renders") or [] if isinstance(r, dict)]
    if not renders and not facts.get("version"):
        return Markup()
    figures = []
    for r in renders:
        name = r.get("image")
        png = images.get(str(name)) if name else None
        if png is None:
            continue
        uri = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
        caption = f"{r.get('device')}: {r.get('status')}, {r.get('render_s', '-')} s"
        if r.get("psnr_db") is not None:
            caption += f", PSNR {r.get('psnr_db')} dB vs CPU"
        figures.append(
            el(
                "figure",
                el("img", src=uri, alt=f"{r.get('device')} render", class_="render"),
                el("figcaption", caption),
            )
        )
    summary = f"Blender {facts.get('version_string') or facts.get('version')} ({facts.get('mode')})"
    return Markup(
        el("h2", "Blender renders", id="blender")
        + el("p", summary)
        + (records_table(renders) if renders else Markup())
        + Markup("".join(figures))
    )


def render_html(data: Mapping[str, Any], images: Mapping[str, bytes]) -> str:
    """The page for one run: ``data`` is report.json's content, ``images`` the run's PNGs by name."""
    verdict = "PASSED" if data.get("ok") else "FAILED"
    body = el(
        "main",
        verdict_section(data),
        ladder_section(data),
        packages_section(data),
        hardware_section(data),
        checks_section(data),
        blender_section(data, images),
    )
    head = Markup(
        '<meta charset="utf-8">'
        + f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">'
        + '<meta name="viewport" content="width=device-width, initial-scale=1">'
        + '<meta name="referrer" content="no-referrer">'
        + el("title", f"{verdict} — envbuild report {data.get('run_id')}")
        + el("style", Markup(STYLE))
    )
    return "<!DOCTYPE html>\n" + el("html", el("head", head), el("body", body), lang="en") + "\n"
