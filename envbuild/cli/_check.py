"""``envbuild check PROFILE [--target ID]... [--driver VERSION] [--smi FILE]... [--days N] [--prices FILE]
[--json]``.

``--smi`` judges captures of the machine's vendor tools (:mod:`envbuild.hardware.capture_check`).

Exit 0 when no finding is an error, 1 when some are, 2 for invalid input or usage, 3 when ``--resolve``
cannot reach an index.  Imports neither torch nor docker.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from envbuild.boundary import to_data
from envbuild.cli._lock import index_options, links
from envbuild.cli.app import cli, handle_errors, json_option, verbose_option
from envbuild.cli.output import envelope, print_findings, print_json
from envbuild.errors import EXIT_FINDINGS, EXIT_OK
from envbuild.models import CheckResult, Plan, Profile
from envbuild.models.hardware import HardwareFacts


def result_json(result: CheckResult, hardware: HardwareFacts | None = None) -> dict[str, Any]:
    """``{"format", "command", "ok", "findings", "plan"}``; the plan's profile is reduced to
    name/path/sha256, and the plan carries ``order`` (per target: lots, cards, devices, idle devices, the
    host memory and CPUs each machine must give, the driver floor, whether the lots are separate machines,
    the total per duration).  With ``--smi``, ``hardware`` holds the captures' facts, merged."""
    from envbuild.catalog.order import order_lines
    from envbuild.plan.host_driver import provisional

    plan = to_data(result.plan, exclude={"profile"})
    profile = result.plan.profile
    plan = {
        "profile": {"name": profile.name, "path": profile.path, "sha256": profile.sha256},
        **plan,
        "order": [
            line.as_json() for line in order_lines(result.plan, provisional=provisional(result.findings))
        ],
    }
    extra = {"hardware": to_data(hardware)} if hardware is not None else {}
    return envelope("check", ok=result.ok, findings=result.findings, plan=plan, **extra)


def _positive_hours(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """``--hours``: a positive, finite number of hours (click refuses what is not a number)."""
    import math

    if value is not None and (not math.isfinite(value) or value <= 0):
        raise click.BadParameter(
            f"{value:g} is not a positive number of hours; give the hours the job needs, e.g. --hours 48"
        )
    return value


def with_hours(profile: Profile, hours: float | None) -> Profile:
    """``profile`` with ``--hours`` in place of its ``[order] hours`` (recorded with the bundle's inputs,
    so `envbuild lock` writes the same order summary)."""
    from dataclasses import replace

    return profile if hours is None else replace(profile, order=replace(profile.order, hours=hours))


def order_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--days N``, ``--hours N`` and ``--prices FILE.toml`` (check and render)."""
    func = click.option(
        "--hours",
        type=float,
        metavar="N",
        callback=_positive_hours,
        help="Hours the job needs (replaces the profile's [order] hours): the order summary says which "
        "rental durations fit it, the hours left unused or the overrun, and each one's price where known.",
    )(func)
    func = click.option(
        "--prices",
        "prices",
        type=click.Path(dir_okay=False, path_type=Path),
        metavar="FILE.toml",
        help='Lot prices (card id -> days -> USD per lot, plus source and date; the README\'s "Prices" '
        "gives the format); replace the built-in ones.",
    )(func)
    return click.option(
        "--days",
        type=int,
        metavar="3|7|30",
        help="Rental duration in days: the order summary prices this one (default: every duration).",
    )(func)


def order_summary(result: CheckResult) -> list[str]:
    from envbuild.catalog.order import summary_lines
    from envbuild.plan.host_driver import provisional

    return summary_lines(result.plan, provisional=provisional(result.findings))


def _torch_row(plan: Plan) -> str:
    """``2.14.1+cu130`` (a variant index's local tag) or ``2.15.0 (cu132 build)`` (an index's default)."""
    if not plan.torch_version:
        return "-"
    pin = next((p for p in plan.pins if p.name == "torch"), None)
    if pin is not None and pin.local:
        return pin.spec.removeprefix("torch==")
    return f"{plan.torch_version} ({plan.torch_variant} build)" if plan.torch_variant else plan.torch_version


def _base_row(plan: Plan) -> str:
    """``nvidia/cuda:13.0.2-base-ubuntu24.04 [cuda-base]``; on a plain OS base for CUDA, what the
    Dockerfile sets in place of NVIDIA's image: ``debian:12 [os; NVIDIA_REQUIRE_CUDA=cuda>=12.6 ...]``."""
    from envbuild.plan.environment import nvidia_env

    row = f"{plan.base_image} [{plan.base_flavor}"
    require = dict(nvidia_env(plan)).get("NVIDIA_REQUIRE_CUDA")
    if require:
        row += f"; the Dockerfile sets NVIDIA_REQUIRE_CUDA={require}"
    return row + "]"


def _print_human(result: CheckResult, *, verbose: bool = False, hardware: str | None = None) -> None:
    """The plan as a two-column grid, then the findings and the verdict (rich: plain text off a terminal).
    A driver floor and CUDA version that still depend on the torch resolution installs say so in place."""
    from rich.table import Table
    from rich.text import Text

    from envbuild.catalog.order import PROVISIONAL
    from envbuild.cli.output import console
    from envbuild.plan.host_driver import provisional

    out = console()
    plan = result.plan
    note = f" ({PROVISIONAL})" if provisional(result.findings) else ""
    rows = [
        ("profile", f"{plan.profile.name} ({plan.profile.path})"),
        (
            "targets",
            ", ".join(
                c.id if c.vendor == "cpu" else f"{c.id} ({c.arch}, {c.memory_gib:g} GB)" for c in plan.targets
            )
            or "-",
        ),
        ("base image", _base_row(plan)),
        ("os / python", f"{plan.os_name} / Python {plan.python_version} ({plan.python_provision})"),
        ("backend", f"{plan.backend} {plan.accelerator_version or ''}".strip() + note),
        ("torch", _torch_row(plan)),
        ("pins", " ".join(p.spec for p in plan.pins) or "-"),
        ("index", " ".join(i.url for i in plan.index_urls)),
        ("arch list", " ".join(plan.torch_arch_list) or "-"),
        ("required archs", " ".join(plan.required_archs) or "-"),
        ("min driver", f"{plan.min_driver}{note}" if plan.min_driver else "-"),
        ("probe ops", ", ".join(plan.probe_ops) + " (built with the image)" if plan.probe_ops else "-"),
        ("builder", _builder_row(plan)),
        ("compiler in image", _compiler_row(plan)),
        ("apt", " ".join(plan.apt)),
    ]
    if plan.blender_version:
        rows.append(("blender", f"{plan.blender_version} {plan.blender_url or ''}"))
    rows += [("order", line) for line in order_summary(result)]
    if hardware:
        rows.append(("hardware", hardware))
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for key, value in rows:
        grid.add_row(Text(key), Text(value))  # Text: no markup in values read from files
    out.print(grid)
    print_findings(result.findings, verbose=verbose, out=out)
    errors = sum(f.severity == "error" for f in result.findings)
    out.print(
        Text("ok", style="bold green") if result.ok else Text(f"{errors} error finding(s)", style="bold red")
    )


@cli.command("check")
@click.argument("profile")
@click.option("--target", "targets", multiple=True, metavar="ID", help="Target card id (repeatable).")
@click.option("--driver", metavar="VERSION", help="NVIDIA driver version of the machine, e.g. 570.124.06.")
@click.option(
    "--smi",
    "smi",
    multiple=True,
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="A capture of the machine to judge the hardware by: `nvidia-smi -q -x`, the plain `nvidia-smi` "
    "table, `amd-smi ... --json` or `rocm-smi --json` output (repeatable: captures of one machine, merged). "
    "Its driver replaces --driver.",
)
@json_option("Print {format, command, ok, findings, plan} as JSON (also on failure).")
@verbose_option()
@click.option(
    "--resolve",
    is_flag=True,
    help="Also resolve every distribution for the image's target (as `envbuild lock` does); writes nothing.",
)
@index_options
@order_options
@handle_errors
def check_cmd(
    profile: str,
    targets: tuple[str, ...],
    driver: str | None,
    smi: tuple[Path, ...],
    as_json: bool,
    verbose: bool,
    resolve: bool,
    index_urls: tuple[str, ...],
    find_links: tuple[str, ...],
    days: int | None,
    hours: float | None,
    prices: Path | None,
) -> None:
    """Resolve PROFILE (a built-in name or a .toml path) into a plan and check it against the targets."""
    from envbuild.catalog.prices import with_order
    from envbuild.errors import UsageError
    from envbuild.plan import check
    from envbuild.profile import load_profile

    if (index_urls or find_links) and not resolve:
        raise UsageError("--index-url and --find-links apply only with --resolve")
    loaded = with_hours(load_profile(profile), hours)
    captures = None
    if smi:
        from envbuild.hardware.capture_check import read_captures

        captures = read_captures(smi, driver)
        driver = captures.driver

    def plan(**kwargs: Any) -> CheckResult:
        checked = check(loaded, targets=targets or None, driver=driver, **kwargs)
        return with_order(checked, days=days, price_file=prices)

    if resolve:
        from envbuild.lock.replan import resolve_and_replan

        result = resolve_and_replan(plan, index_urls=index_urls, find_links=links(find_links)).result
    else:
        result = plan()
    hardware = None
    if captures is not None:
        from envbuild.hardware.capture_check import summary, with_hardware

        result, hardware = with_hardware(result, captures), summary(captures)
    if as_json:
        print_json(result_json(result, captures.facts if captures else None))
    else:
        _print_human(result, verbose=verbose, hardware=hardware)
    sys.exit(EXIT_OK if result.ok else EXIT_FINDINGS)


def _compiler_row(plan: Plan) -> str:
    """Whether the final image carries a compiler, and why (a renter downloads it)."""
    if plan.compiles:
        return "yes: a toolchain (validate.compile_extensions, or a requirement built from source)"
    if plan.profile.validate_.torch_compile:
        return "g++ and Python's headers (validate.torch_compile)"
    return "no"


def _builder_row(plan: Plan) -> str:
    """Where the builder stage compiles (I-BUILDER-TOOLKIT-WHEELS / I-BUILDER-DERIVED say why)."""
    if plan.builder_toolkit:
        return f"the base image, with cuda-toolkit[nvcc,cccl]=={plan.builder_toolkit} from the package index"
    return plan.builder_image or "the base image"
