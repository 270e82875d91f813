"""Commands: ``envbuild validate``, and the ``envbuild report`` group (``verify``, ``sign``, ``diff``,
``fleet``: :mod:`envbuild.cli._report`).

``validate_command`` is the plain function behind ``envbuild validate``; ``validate_image_command`` runs
the validator inside a container of an image (:mod:`envbuild.image.run`).

Exit 0 passed, 1 a stage failed (or the reports differ / do not verify), 2 bad input, 3 no engine,
130 / 143 interrupted.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from envbuild.cli._report import register as register_report_commands
from envbuild.cli.app import cli, handle_errors, json_option
from envbuild.cli.output import echo, envelope, print_json
from envbuild.errors import UsageError


@dataclass(frozen=True)
class ValidateOptions:
    """The options shared by in-process ``envbuild validate`` and ``envbuild validate --image``."""

    lock: Path | None
    python: str | None
    out: Path
    stages: str | None
    keep_going: bool
    as_json: bool
    workdir: Path | None
    timeouts: tuple[str, ...]
    skip: tuple[str, ...] = ()  # --skip STAGE (repeatable, or comma-separated)
    strict: bool = False  # --strict: every warning of the run is an error
    perf_budget: float | None = None  # --perf-budget SECONDS: the performance stage's time budget
    fleet: str | None = None  # --fleet HOST:PORT
    nodes: int | None = None  # --nodes N
    node_rank: int | None = None  # --node-rank R
    fleet_token: str | None = None  # --fleet-token (or $ENVBUILD_FLEET_TOKEN); never written


_STYLE = {"passed": "green", "skipped": "cyan", "failed": "red", "timed_out": "red", "aborted": "yellow"}


def _parse_timeouts(values: tuple[str, ...]) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in values:
        stage, sep, secs = item.partition("=")
        try:
            value = float(secs)
        except ValueError:
            value = -1.0
        if not sep or value <= 0:
            raise UsageError(f"--timeout {item!r}: expected STAGE=SECONDS with SECONDS > 0")
        out[stage.strip()] = value
    return out


def report_json(run_dir: Path) -> dict[str, Any]:
    """``validate --json``: the report (report.json) with one error finding per stage that did not pass."""
    report = json.loads((run_dir / "report.json").read_text(encoding="utf-8"))
    findings = [
        {
            "severity": "error",
            "code": "E-STAGE-" + str(stage["status"]).upper().replace("_", "-"),
            "message": f"{stage['stage']}: {stage.get('error') or stage['status']}"
            + (f" (hint: {stage['hint']})" if stage.get("hint") else ""),
            "source": None,
        }
        for stage in report.get("stages", [])
        if stage.get("status") in ("failed", "timed_out", "aborted")
    ]
    ok = bool(report.get("ok")) and not report.get("interrupted")
    return envelope("validate", ok=ok, findings=findings, report_dir=str(run_dir), report=report)


def _print_table(report: object, run_dir: Path, err: bool) -> None:
    from rich.table import Table

    from envbuild.cli.output import console as make_console
    from envbuild.cli.output import markup as escape
    from envbuild.report.model import Report

    assert isinstance(report, Report)
    console = make_console(err=err)
    table = Table(title=f"envbuild validate — {report.run_id}")
    for col in ("stage", "status", "seconds", "detail"):
        table.add_column(col, overflow="fold")
    warned: list[tuple[str, str]] = []
    for s in report.stages:
        detail = s.error or str(s.facts.get("reason", ""))
        warnings = [str(w) for w in s.facts.get("warnings") or []]
        warned += [(s.stage, w) for w in warnings]
        if s.hint and warnings and s.hint == "; ".join(warnings):  # printed whole below the table
            plural = "s" if len(warnings) > 1 else ""
            detail += ("\n" if detail else "") + f"{len(warnings)} warning{plural} (below)"
        elif s.hint:
            detail += f"\nhint: {s.hint}"
        table.add_row(
            escape(s.stage),
            f"[{_STYLE[s.status]}]{s.status}[/]",
            f"{s.duration_s:.2f}",
            escape(detail, multiline=True),
            style=None,
        )
    console.print(table, markup=True)
    for stage, text in warned:
        console.print(f"[yellow]warning[/]: {escape(stage)}: {escape(text)}", markup=True, soft_wrap=True)
    console.print(
        f"lock {escape(report.lock.path)}; interpreter {escape(report.python)}; "
        f"workdir {escape(report.workdir)}",
        markup=True,
        soft_wrap=True,
    )
    verdict = "[green]PASSED[/]" if report.ok else "[red]FAILED[/]"
    if report.interrupted:
        verdict += f" (interrupted by {escape(report.signal)})"
    console.print(f"{verdict}  report: {escape(run_dir)}", markup=True)
    if report.first_failure:
        console.print(
            f"first failure: [bold]{escape(report.first_failure.stage)}[/]: "
            f"{escape(report.first_failure.error)}",
            markup=True,
        )


def validate_command(opts: ValidateOptions) -> int:
    """Run the validation, print, and return the exit code (0 passed, 1 failed, 130/143 interrupted)."""
    from envbuild.validate import exit_code, run_validation

    names = opts.stages.split(",") if opts.stages is not None else None
    fleet = None
    if opts.fleet is not None:
        from envbuild.validate.rendezvous import parse_fleet

        fleet = parse_fleet(opts.fleet, opts.nodes, opts.node_rank, opts.fleet_token)
    elif opts.nodes is not None or opts.node_rank is not None:
        raise UsageError("--nodes and --node-rank need --fleet HOST:PORT")
    else:  # no fleet: a token in the environment is inherited by no probe and no [[checks]] command
        os.environ.pop("ENVBUILD_FLEET_TOKEN", None)

    def progress(res: object) -> None:
        from envbuild.report.model import StageResult

        assert isinstance(res, StageResult)
        echo(f"  {res.stage:<12} {res.status:<9} {res.duration_s:7.2f}s", err=True)

    report, run_dir = run_validation(
        opts.lock,
        python=opts.python,
        out=opts.out,
        stages=names,
        keep_going=opts.keep_going,
        workdir=opts.workdir,
        timeouts=_parse_timeouts(opts.timeouts),
        on_result=progress,
        skip=[name for item in opts.skip for name in item.split(",")],
        strict=opts.strict,
        perf_budget=opts.perf_budget,
        fleet=fleet,
    )
    if opts.as_json:
        print_json(report_json(run_dir))
    _print_table(report, run_dir, err=opts.as_json)
    return exit_code(report)


def validate_image_command(
    image: str, gpus: str | None, opts: ValidateOptions, docker_args: tuple[str, ...] = ()
) -> int:
    """``envbuild validate --image TAG``: the validator inside a container, its report copied to ``opts.out``.

    Returns the in-container validator's exit code; on a host whose Docker cannot pass the GPUs (run
    without them, :mod:`envbuild.image.gpu_host`) never 0.
    """
    from envbuild.errors import EXIT_FINDINGS, UsageError
    from envbuild.image.gpu_host import first_failure, rented_machine_line, without_gpus_json
    from envbuild.image.run import validate_image

    if opts.lock is not None or opts.python is not None:
        raise UsageError("--image uses the lock and interpreter inside the image; drop --lock/--python")
    if opts.fleet is not None:
        raise UsageError(
            "--fleet with --image: the lots must reach each other, and --image runs the container on "
            "Docker's default network; run `envbuild validate --fleet ...` inside a container started "
            "with `docker run --network host` (or a network the lots share) instead"
        )
    args: list[str] = []
    if opts.stages is not None:
        args += ["--stages", opts.stages]
    if opts.keep_going:
        args.append("--keep-going")
    if opts.workdir is not None:
        args += ["--workdir", str(opts.workdir)]
    for item in opts.timeouts:
        args += ["--timeout", item]
    for item in opts.skip:
        args += ["--skip", item]
    if opts.strict:
        args.append("--strict")
    if opts.perf_budget is not None:
        args += ["--perf-budget", f"{opts.perf_budget:g}"]
    result = validate_image(image, out=opts.out, gpus=gpus, validator_args=args, docker_args=docker_args)
    no_gpus = result.no_gpus
    if opts.as_json and result.run_dirs:
        data = report_json(result.run_dirs[-1])
        print_json(data if no_gpus is None else without_gpus_json(data, image, no_gpus))
    for run_dir in result.run_dirs:
        click.echo(f"envbuild: report copied to {run_dir}", err=True)
    if not result.run_dirs:
        message = f"the validator in {image} exited {result.exit_code} without writing a report"
        if opts.as_json:
            finding = {"severity": "error", "code": "E-VALIDATE", "message": message, "source": None}
            data = envelope("validate", ok=False, findings=[finding], report_dir=None, report=None)
            print_json(data if no_gpus is None else without_gpus_json(data, image, no_gpus))
        click.echo(f"envbuild: {message}", err=True)
    if no_gpus is not None:
        failure = first_failure(result.run_dirs[-1]) if result.run_dirs else None
        click.echo(rented_machine_line(image, failure), err=True)
        return result.exit_code or EXIT_FINDINGS
    return result.exit_code


@cli.command("validate")
@click.option(
    "--lock",
    "lock",
    type=click.Path(path_type=Path),
    default=None,
    help="A bundle folder or a lock file "
    "(default: /etc/envbuild/envbuild.lock.json, else ./envbuild.lock.json).",
)
@click.option(
    "--python",
    "python",
    default=None,
    help="Interpreter under test (default: the lock's, else the active venv/conda env, else envbuild's own).",
)
@click.option(
    "--out",
    "out",
    type=click.Path(path_type=Path),
    default=Path("runs"),
    show_default=True,
    help="Folder that receives the report folder (one per run, named by its run id).",
)
@click.option("--stages", default=None, help="Comma-separated stages (their prerequisites are added).")
@click.option(
    "--keep-going",
    is_flag=True,
    help="After a failure, still run every stage that can (skipped only when a fact it needs is missing).",
)
@json_option(
    "Print {format, command, ok, findings, report_dir, report} as JSON, report being report.json "
    "(the table goes to stderr)."
)
@click.option(
    "--workdir",
    type=click.Path(path_type=Path),
    default=None,
    help="Where checks and the checkpoint run "
    "(default: the bundle's app/ with --lock BUNDLE, else the lock's workdir).",
)
@click.option(
    "--timeout",
    "timeouts",
    multiple=True,
    metavar="STAGE=SECONDS",
    help="Override a stage's timeout (repeatable).",
)
@click.option(
    "--skip",
    "skip",
    multiple=True,
    metavar="STAGE",
    help="Do not run STAGE (repeatable); every stage that needs it is skipped too, and says why.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Make every warning of the run an error (a check that left processes behind, an impostor "
    "python on PATH, low limits): its stage fails.",
)
@click.option(
    "--perf-budget",
    "perf_budget",
    type=float,
    default=None,
    metavar="SECONDS",
    help="Time the performance stage measures for (default 60; the stage is in the default ladder of a "
    "GPU lock, and runs on the CPU when --stages names it).",
)
@click.option(
    "--fleet",
    default=None,
    metavar="HOST:PORT",
    help="Join the lots of one order into a group: node 0 listens on HOST:PORT (and PORT+1), the others "
    "connect; the performance stage then measures an all-reduce across the lots.",
)
@click.option("--nodes", type=int, default=None, metavar="N", help="With --fleet: the number of lots.")
@click.option(
    "--node-rank", type=int, default=None, metavar="R", help="With --fleet: this lot's rank, 0 listens."
)
@click.option(
    "--fleet-token",
    envvar="ENVBUILD_FLEET_TOKEN",
    default=None,
    metavar="TOKEN",
    help="With --fleet: the secret every lot shares (128 bits: 32+ hex digits or 22+ base64url "
    "characters, e.g. python3 -c 'import secrets; print(secrets.token_urlsafe(24))'; prefer "
    "$ENVBUILD_FLEET_TOKEN: an argument shows in ps). Never written to a report.",
)
@click.option(
    "--image",
    default=None,
    metavar="TAG",
    help="Validate inside a container of this image (report copied to --out).",
)
@click.option(
    "--gpus",
    default=None,
    metavar="all|N|none",
    help="With --image: GPUs to expose (default all for CUDA; where this host's Docker cannot pass them, "
    "none, with --keep-going, and the run cannot pass).",
)
@click.option(
    "--docker-arg",
    "docker_args",
    multiple=True,
    metavar="ARG",
    help="With --image: an extra `docker run` flag on top of the recommended ones, e.g. "
    "--docker-arg=--shm-size=2g (repeatable; --user, --entrypoint, --privileged and the flags envbuild "
    "sets itself are refused).",
)
@handle_errors
def validate_cmd(
    image: str | None,
    gpus: str | None,
    docker_args: tuple[str, ...],
    lock: Path | None,
    python: str | None,
    out: Path,
    stages: str | None,
    keep_going: bool,
    as_json: bool,
    workdir: Path | None,
    timeouts: tuple[str, ...],
    skip: tuple[str, ...],
    strict: bool,
    perf_budget: float | None,
    fleet: str | None,
    nodes: int | None,
    node_rank: int | None,
    fleet_token: str | None,
) -> None:
    """Check this machine against the lock, stage by stage, and write a verifiable report."""
    opts = ValidateOptions(
        lock,
        python,
        out,
        stages,
        keep_going,
        as_json,
        workdir,
        timeouts,
        skip=skip,
        strict=strict,
        perf_budget=perf_budget,
        fleet=fleet,
        nodes=nodes,
        node_rank=node_rank,
        fleet_token=fleet_token,
    )
    if image is not None or gpus is not None or docker_args:  # --image TAG: see envbuild/image/run.py
        if image is None:
            raise UsageError(
                ("--docker-arg" if docker_args and gpus is None else "--gpus") + " needs --image"
            )
        sys.exit(validate_image_command(image, gpus, opts, docker_args))
    sys.exit(validate_command(opts))


@cli.group("report")
def report_group() -> None:
    """Verify or sign a copied report, compare two reports, or put an order's lots side by side."""


register_report_commands(report_group)
