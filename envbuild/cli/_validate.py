"""Commands: ``envbuild validate``, ``envbuild report verify DIR``, ``envbuild report diff A B``.

``validate_command`` is the plain function behind ``envbuild validate``; another command (the
``--image`` variant in envbuild/image/) can wrap it or call :func:`envbuild.validate.run_validation`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from envbuild.cli import cli, handle_errors
from envbuild.cli.args import argument, echo, option, path_type
from envbuild.errors import EXIT_FINDINGS, EXIT_OK, UsageError


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


def _print_table(report: object, run_dir: Path, err: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    from envbuild.validate import Report

    assert isinstance(report, Report)
    console = Console(stderr=err)
    table = Table(title=f"envbuild validate — {report.run_id}")
    for col in ("stage", "status", "seconds", "detail"):
        table.add_column(col, overflow="fold")
    for s in report.stages:
        detail = s.error or str(s.facts.get("reason", ""))
        if s.hint:
            detail += f"\nhint: {s.hint}"
        table.add_row(
            s.stage, f"[{_STYLE[s.status]}]{s.status}[/]", f"{s.duration_s:.2f}", detail, style=None
        )
    console.print(table, markup=True)
    echo(f"lock {report.lock.path}; interpreter {report.python}; workdir {report.workdir}", err=err)
    verdict = "[green]PASSED[/]" if report.ok else "[red]FAILED[/]"
    if report.interrupted:
        verdict += f" (interrupted by {report.signal})"
    console.print(f"{verdict}  report: {run_dir}")
    if report.first_failure:
        console.print(
            f"first failure: [bold]{report.first_failure.stage}[/]: {report.first_failure.error}", markup=True
        )


def validate_command(opts: ValidateOptions) -> int:
    """Run the validation, print, and return the exit code (0 passed, 1 failed, 130/143 interrupted)."""
    from envbuild.validate import exit_code, run_validation

    names = opts.stages.split(",") if opts.stages is not None else None

    def progress(res: object) -> None:
        from envbuild.validate import StageResult

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
    )
    if opts.as_json:
        echo((run_dir / "report.json").read_text(encoding="utf-8"), nl=False)
    _print_table(report, run_dir, err=opts.as_json)
    return exit_code(report)


@cli.command("validate")
@option(
    "--lock",
    "lock",
    type=path_type(),
    default=None,
    help="a bundle folder or a lock file "
    "(default: /etc/envbuild/envbuild.lock.json, else ./envbuild.lock.json)",
)
@option(
    "--python",
    "python",
    default=None,
    help="interpreter under test (default: the lock's, else the active venv/conda env, else envbuild's own)",
)
@option("--out", "out", type=path_type(), default=Path("runs"), show_default=True)
@option("--stages", default=None, help="comma-separated stages (their prerequisites are added)")
@option(
    "--keep-going",
    is_flag=True,
    help="after a failure, still run every stage that can (skipped only when a fact it needs is missing)",
)
@option("--json", "as_json", is_flag=True, help="print report.json on stdout (the table goes to stderr)")
@option(
    "--workdir",
    type=path_type(),
    default=None,
    help="where checks and the checkpoint run "
    "(default: the bundle's app/ with --lock BUNDLE, else the lock's workdir)",
)
@option("--timeout", "timeouts", multiple=True, metavar="STAGE=SECONDS", help="override a stage's timeout")
@option(
    "--skip",
    "skip",
    multiple=True,
    metavar="STAGE",
    help="do not run STAGE (repeatable); every stage that needs it is skipped too, and says why",
)
@option("--image", default=None, help="validate inside a container of this image (report copied to --out)")
@option(
    "--gpus", default=None, metavar="all|N|none", help="with --image: GPUs to expose (default all for CUDA)"
)
@option(
    "--docker-arg",
    "docker_args",
    multiple=True,
    metavar="ARG",
    help="with --image: an extra `docker run` flag on top of the recommended ones, e.g. "
    "--docker-arg=--shm-size=2g (repeatable; --user, --entrypoint, --privileged and the flags envbuild "
    "sets itself are refused)",
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
) -> None:
    """Check this machine against the lock, stage by stage, and write a verifiable report."""
    opts = ValidateOptions(lock, python, out, stages, keep_going, as_json, workdir, timeouts, skip=skip)
    if image is not None or gpus is not None or docker_args:  # --image TAG: see envbuild/image/run.py
        from envbuild.cli._build import validate_image_command

        if image is None:
            raise UsageError(
                ("--docker-arg" if docker_args and gpus is None else "--gpus") + " needs --image"
            )
        sys.exit(validate_image_command(image, gpus, opts, docker_args))
    sys.exit(validate_command(opts))


@cli.group("report")
def report_group() -> None:
    """Verify a copied report, or compare two reports."""


@report_group.command("verify")
@argument("directory", type=path_type())
@handle_errors
def report_verify(directory: Path) -> None:
    """Check every file of a report DIRECTORY against its MANIFEST.sha256 (exit 1 on any problem)."""
    from envbuild.validate import verify_report

    problems = verify_report(directory)
    if problems:
        for p in problems:
            echo(p)
        echo(f"{directory}: {len(problems)} problem(s)", err=True)
        sys.exit(EXIT_FINDINGS)
    echo(f"{directory}: intact")
    sys.exit(EXIT_OK)


@report_group.command("diff")
@argument("a", type=path_type())
@argument("b", type=path_type())
@handle_errors
def report_diff(a: Path, b: Path) -> None:
    """Compare two reports: stage statuses, packages, devices, driver.

    Exit 0 same, 1 different, 2 when either is not a readable report (so "different" stays unambiguous).
    """
    from envbuild.errors import ReportError
    from envbuild.validate import diff_reports, load_report

    try:
        reports = load_report(a), load_report(b)
    except ReportError as exc:
        raise UsageError(exc.message) from None
    diffs = diff_reports(*reports)
    for line in diffs:
        echo(line)
    if not diffs:
        echo("no differences")
    sys.exit(EXIT_FINDINGS if diffs else EXIT_OK)
