"""The bundle's README: what to order, how to build, run and validate, findings and provenance."""

from __future__ import annotations

import json
import re
import shlex

from envbuild import __version__
from envbuild.models import LOCK_PATH_IN_IMAGE, PYTHON_IN_IMAGE, CheckResult
from envbuild.render.apt import apt_packages, runtime_packages
from envbuild.render.env import render_template
from envbuild.render.quote import md, md_code
from envbuild.render.view import PREPARATION, OrderRow, order_days, order_price_sources, order_rows
from envbuild.typed import Record

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}
# Findings about this machine, not the bundle: the catalog overlay's path (in the user's home) and age
# (it changes every day).  `check` shows them; a bundle's bytes must not depend on where or when it was
# rendered.  W-OVERLAY-UNCONFIRMED, about what the plan takes from the overlay, stays.
LOCAL_ONLY = frozenset({"I-OVERLAY", "W-OVERLAY-STALE", "W-OVERLAY-INVALID"})


class FindingRow(Record, kw_only=False):
    severity: str
    code: str
    message: str
    ref: str  # "1": the number of its source in the list under the table; "" when it has none


class FindingSource(Record, kw_only=False):
    number: int
    text: str


class RunReason(Record, kw_only=False):
    flag: str
    why: str


class SourceRow(Record, kw_only=False):
    setting: str
    source: str


_CI_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")


def ci_word(value: str) -> str:
    """A profile ref or target id for the workflow's matrix: a plain word, else a quoted YAML string."""
    return value if _CI_WORD.match(value) else json.dumps(value).replace("`", "\\u0060")


def suggested_tag(result: CheckResult) -> str:
    profile = result.plan.profile
    return f"envbuild/{profile.name}:{profile.sha256[:12]}"


def render_readme(result: CheckResult, command: str) -> str:
    plan = result.plan
    profile = plan.profile
    where = f"{profile.path}"
    rows: tuple[OrderRow, ...] = order_rows(plan)
    gpu_rows = tuple(r for r in rows if r.vendor != "cpu")
    ordered = sorted(
        (f for f in result.findings if f.code not in LOCAL_ONLY),
        key=lambda f: (SEVERITY_ORDER[f.severity], f.code),
    )
    numbers: dict[str, int] = {}  # one number per distinct source, in the order the table first cites it
    for f in ordered:
        if f.source:
            numbers.setdefault(f.source, len(numbers) + 1)
    findings = tuple(
        FindingRow(
            f.severity,
            md_code(f.code, "finding"),
            md(f.message, "finding"),
            f"[{numbers[f.source]}]" if f.source else "",
        )
        for f in ordered
    )
    finding_sources = tuple(FindingSource(n, md(text, "finding source")) for text, n in numbers.items())
    sources = tuple(
        SourceRow(md_code(k, "source"), md_code(v, "source")) for k, v in sorted(profile.sources.items())
    )
    vendors = {r.vendor for r in gpu_rows}
    from envbuild.runopts import run_command, run_options  # the one rule: README = validate --image

    options = run_options(plan.backend, memory_gib=profile.resources.memory_gib)
    return render_template(
        "README.md.j2",
        version=__version__,
        name=md(profile.name, "name"),
        description=md(profile.description, f"{where}: description") if profile.description else "",
        profile_path=md_code(profile.path, "path"),
        sha256=profile.sha256,
        command=md_code(command, "command"),
        preparation=PREPARATION[profile.kind],
        rows=rows,
        gpu_rows=gpu_rows,
        gpus=profile.resources.gpus,
        gpu_memory=f"{profile.resources.gpu_memory_gib:g} GiB" if profile.resources.gpu_memory_gib else "",
        min_driver=plan.min_driver or "",
        rocm_host=plan.backend == "rocm" and "amd" in vendors,
        days=plan.days or 0,
        durations=order_days(plan),
        price_sources=order_price_sources(plan),
        backend=plan.backend,
        backend_name={"cuda": "CUDA", "rocm": "ROCm", "cpu": "CPU"}[plan.backend],
        accelerator_version=plan.accelerator_version or "",
        torch=f"{plan.torch_version}+{plan.torch_variant}" if plan.torch_version else "",
        os_name=md(plan.os_name, "os"),
        python=plan.python_version,
        base_image=md_code(plan.base_image, "base image"),
        base_flavor=plan.base_flavor,
        apt=md(" ".join(runtime_packages(apt_packages(plan))), "apt"),
        apt_snapshot=plan.apt_snapshot or "",
        apt_snapshot_url=plan.apt_snapshot_url or "",
        blender=plan.blender_version or "",
        blender_source=plan.blender_source or "",
        blender_devices=", ".join(profile.blender.devices),
        blender_device=profile.blender.devices[0] if profile.blender.devices else "CPU",
        tag=suggested_tag(result),
        run_command=run_command(options=options, tag=suggested_tag(result), sep=" \\\n  "),
        run_reasons=tuple(RunReason(flag, why) for flag, why in options.reasons()),
        nvidia="nvidia" in vendors,
        amd="amd" in vendors,
        findings=findings,
        finding_sources=finding_sources,
        ok=result.ok,
        sources=sources,
        lock_path=LOCK_PATH_IN_IMAGE,
        python_in_image=PYTHON_IN_IMAGE,
        checks=tuple(md_code(c.name, "checks") for c in profile.checks),
        ci_profiles=(ci_word(shlex.split(command)[2] if len(shlex.split(command)) > 2 else profile.name),),
        ci_targets=tuple(ci_word(c.id) for c in plan.targets) or ("cpu",),
    )
