"""The bundle's README: what to order, how to build, run and validate, findings and provenance."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envbuild import __version__
from envbuild.models import LOCK_PATH_IN_IMAGE, PYTHON_IN_IMAGE, CheckResult
from envbuild.render.apt import apt_packages, runtime_packages
from envbuild.render.quote import md, md_code
from envbuild.render.view import (
    PREPARATION,
    OrderRow,
    order_days,
    order_host,
    order_price_sources,
    order_rows,
)
from envbuild.templating import render_template

if TYPE_CHECKING:  # the route is computed by lock (above render), which passes it in
    from envbuild.lock.urls import Route

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}
# Findings about this machine, not the bundle: the catalog overlay's path (in the user's home) and age
# (it changes every day).  `check` shows them; a bundle's bytes must not depend on where or when it was
# rendered.  W-OVERLAY-UNCONFIRMED, about what the plan takes from the overlay, stays.
LOCAL_ONLY = frozenset({"I-OVERLAY", "W-OVERLAY-STALE", "W-OVERLAY-INVALID"})


@dataclass(frozen=True)
class FindingRow:
    severity: str
    code: str
    message: str
    ref: str  # "1": the number of its source in the list under the table; "" when it has none


@dataclass(frozen=True)
class FindingSource:
    number: int
    text: str


@dataclass(frozen=True)
class RunReason:
    flag: str
    why: str


@dataclass(frozen=True)
class SourceRow:
    setting: str
    source: str


# Where the README states a driver floor or CUDA version that depends on a torch not decided yet
# (W-DRIVER-PROVISIONAL): said in place, not only in the findings table further down.
PROVISIONAL_MD = (
    "provisional: torch is not pinned, so `envbuild lock .` derives it from the torch that will be "
    "installed; order after locking"
)


def ci_word(value: str) -> str:
    """A profile ref or target id for the workflow's matrix: a plain word, else a quoted YAML string."""
    from envbuild.render.ci import ci_word as word  # not at import: `python -m envbuild.render.ci`

    return word(value)


def suggested_tag(result: CheckResult) -> str:
    profile = result.plan.profile
    return f"envbuild/{profile.name}:{profile.sha256[:12]}"


ROUTE_BEGIN = "<!-- envbuild:provider-route -->"
ROUTE_END = "<!-- /envbuild:provider-route -->"


def provider_route(python: str, route: Route | None = None) -> str:
    """The README's provider route (a machine the provider prepared, no image): the commands that install
    the validator and the environment, for the route that applies.

    ``route``: the resolved lock's route (:func:`envbuild.lock.urls.install_route`), once ``envbuild lock``
    resolved the bundle (it rewrites this section between :data:`ROUTE_BEGIN` and :data:`ROUTE_END`); None:
    the rendered bundle, not locked yet."""
    venv = f"python{python} -m venv"
    tools = (
        "# envbuild itself, offline, from tools/ (`envbuild fetch` fills it and pins each wheel's sha256 in",
        "# tools/requirements.txt; the wheels are for Python " + python + ")",
        f"{venv} /opt/envbuild && /opt/envbuild/bin/pip install --no-deps --require-hashes --no-index \\",
        "  --find-links tools -r tools/requirements.txt",
    )
    if route is None:
        intro = (
            "This bundle is not locked yet. `envbuild lock .` pins every distribution with its sha256 and "
            "rewrites this section with the route that applies: the indexes `requirements-rebuild.txt` "
            "names, when every locked file is on one; else the wheelhouse, after `envbuild fetch . "
            "--find-links DIR`, for the files taken from a local `--find-links` folder (the lock records "
            "them by name and sha256, not by path). Unlocked, pip installs the declared requirements "
            "without hashes."
        )
        env: tuple[str, ...] = (
            "# the environment (not locked: the declared requirements, without hashes)",
            f"{venv} venv && venv/bin/pip install -r requirements-rebuild.txt",
        )
    else:
        needs = (
            f" Set {', '.join(f'`{v}`' for v in route.variables)} first: the index URLs carry `${{VAR}}` "
            "references, which pip fills from the environment (credentials are never written in the bundle)."
            if route.variables
            else ""
        )
        if route.wheelhouse:
            intro = (
                "Route: **the wheelhouse**. "
                + ", ".join(f"`{md(s, 'spec')}`" for s in route.local)
                + " came from a local `--find-links` folder and are on no index, so pip installs offline "
                "from `wheelhouse/`: run `envbuild fetch . --find-links DIR` first (DIR: that folder, or "
                "any folder holding the same files; each is matched by name and sha256)." + needs
            )
            env = (
                "# the environment, offline from wheelhouse/ (every file hash-checked)",
                f"{venv} venv && venv/bin/pip install --no-deps --no-index --find-links wheelhouse \\",
                "  -r requirements-rebuild.txt",
            )
        else:
            intro = (
                "Route: **the indexes**. Every locked file is on the indexes `requirements-rebuild.txt` "
                "names, so a clean pip (no pip configuration needed) installs it; offline, after `envbuild "
                "fetch .`, from `wheelhouse/` instead." + needs
            )
            env = (
                "# the environment, from the indexes requirements-rebuild.txt names (each file hash-checked)",
                f"{venv} venv && venv/bin/pip install --no-deps -r requirements-rebuild.txt",
                "#   offline, after `envbuild fetch .`: add --no-index --find-links wheelhouse",
            )
    lines = [
        ROUTE_BEGIN,
        "On a machine the provider prepared (no image of yours), from this folder. " + intro,
        "",
        "```sh",
        *tools,
        *env,
        "# validate that interpreter, with your checks run in app/",
        "/opt/envbuild/bin/envbuild validate --lock . --python venv/bin/python --workdir app",
        "```",
        ROUTE_END,
    ]
    return "\n".join(lines)


def with_provider_route(readme: str, python: str, route: Route) -> str | None:
    """``readme`` with its provider route rewritten for a resolved lock's ``route`` (CPython ``python``);
    None when it has no such section (rendered by an older envbuild, or edited)."""
    start, end = readme.find(ROUTE_BEGIN), readme.find(ROUTE_END)
    if start < 0 or end < start:
        return None
    return readme[:start] + provider_route(python, route) + readme[end + len(ROUTE_END) :]


def _torch_text(result: CheckResult) -> str:
    """``2.14.1+cu130`` (pinned with its local tag) or ``2.15.0 (cu132 build)`` (an index's default build,
    pinned without one: what `envbuild lock` locks for a bare torch line from pypi.org)."""
    plan = result.plan
    if not plan.torch_version:
        return ""
    pin = next((p for p in plan.pins if p.name == "torch"), None)
    if pin is not None and pin.local is None and plan.torch_variant:
        return f"{plan.torch_version} ({plan.torch_variant} build)"
    return f"{plan.torch_version}+{plan.torch_variant}" if plan.torch_variant else plan.torch_version


def render_readme(result: CheckResult, command: str) -> str:
    from envbuild.catalog.order import hours_lines, order_lines
    from envbuild.plan.host_driver import provisional
    from envbuild.render.ci import ci_profile, tag_word

    words = shlex.split(command)
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
        provisional=PROVISIONAL_MD if provisional(result.findings) else "",
        hours=f"{profile.order.hours:g}" if profile.order.hours is not None else "",
        hours_lines=tuple(md(h, "order") for h in hours_lines(plan, order_lines(plan))),
        host=order_host(plan),
        rocm_host=plan.backend == "rocm" and "amd" in vendors,
        days=plan.days or 0,
        durations=order_days(plan),
        price_sources=order_price_sources(plan),
        backend=plan.backend,
        backend_name={"cuda": "CUDA", "rocm": "ROCm", "cpu": "CPU"}[plan.backend],
        accelerator_version=plan.accelerator_version or "",
        torch=_torch_text(result),
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
        provider_route=provider_route(plan.python_version),
        ci_profiles=(ci_profile(words[2] if len(words) > 2 else profile.name, profile.name),),
        ci_targets=tuple(ci_word(tag_word(c.id)) for c in plan.targets) or ("cpu",),
        ci_built_cache=bool(profile.python.build_from_source),
    )
