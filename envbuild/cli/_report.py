"""The ``envbuild report`` commands: ``verify DIR`` (integrity; ``--allowed-signers``: the signature),
``sign DIR --key KEY``, ``diff A B``, ``fleet RUN...``.

:func:`register` adds them to the ``report`` group of :mod:`envbuild.cli._validate`; the shared
decorators are imported when it runs, so this module adds no import circle through ``envbuild.cli``.

Exit 0 ok, 1 differences / a report or signature that does not verify / a fleet with a failed lot or an
outlier, 2 bad input, 3 no usable ssh-keygen.
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

import click

from envbuild.cli.output import echo, envelope, print_json
from envbuild.errors import EXIT_FINDINGS, EXIT_OK, UsageError
from envbuild.report.folder import MANIFEST, SIGNATURE, atomic_write

_STYLE = {"passed": "green", "failed": "red"}
INTEGRITY_NOTE = (
    "integrity in transit, not authenticity: the files match MANIFEST.sha256, but whoever wrote the "
    "folder (the provider's machine too) can recompute it; sign it with `envbuild report sign RUN --key "
    "KEY` after copying it off, and verify with --allowed-signers FILE"
)


def register(group: click.Group) -> None:
    """Add the report commands to ``group``."""
    from envbuild.cli.app import handle_errors, json_option

    @group.command("verify")
    @click.argument("directory", type=click.Path(path_type=Path))
    @click.option(
        "--allowed-signers",
        "allowed_signers",
        type=click.Path(path_type=Path),
        default=None,
        metavar="FILE",
        help="Also check MANIFEST.sha256.sig (made by `envbuild report sign`) against this OpenSSH "
        "allowed-signers file, and name the identity that signed (ssh-keygen -Y verify).",
    )
    @json_option(
        "Print {format, command, ok, findings, directory, integrity, signature, note} as JSON, one finding "
        "per problem."
    )
    @handle_errors
    def report_verify(directory: Path, allowed_signers: Path | None, as_json: bool) -> None:
        """Check every file of a report DIRECTORY against its MANIFEST.sha256 (exit 1 on any problem).

        That is integrity in transit, not authenticity: with --allowed-signers the manifest's signature is
        checked too (exit 1 when it is missing or does not verify; 3 without ssh-keygen).
        """
        from envbuild.report.sign import check_signature
        from envbuild.report.verify import verify_report

        problems = verify_report(directory)
        sig = check_signature(directory, allowed_signers) if allowed_signers is not None else None
        findings = [{"severity": "error", "code": "E-REPORT", "message": p, "source": None} for p in problems]
        findings += [
            {"severity": "error", "code": "E-REPORT-VERDICT", "message": p, "source": None}
            for p in _verdict_problems(directory)
        ]
        if sig is not None and not sig.ok:
            findings.append(
                {"severity": "error", "code": "E-REPORT-SIGNATURE", "message": sig.message, "source": None}
            )
        unchecked = sig is None and (directory / SIGNATURE).is_file()
        ok = not findings
        if as_json:
            signature = (
                {"checked": False, "present": unchecked}
                if sig is None
                else {
                    "checked": True,
                    "ok": sig.ok,
                    "signer": sig.signer,
                    "key": sig.key,
                    "message": sig.message,
                }
            )
            print_json(
                envelope(
                    "report verify",
                    ok=ok,
                    findings=findings,
                    directory=str(directory),
                    integrity=not problems,
                    signature=signature,
                    note=INTEGRITY_NOTE if sig is None and not problems else None,
                )
            )
            sys.exit(EXIT_FINDINGS if findings else EXIT_OK)
        for f in findings:
            echo(f"error: {f['code']}: {f['message']}")
        if not problems:
            echo(f"{directory}: intact (every file matches {MANIFEST})")
        if sig is not None and sig.ok:
            echo(f"{directory}: {sig.message}")
        elif sig is None and not problems:
            echo(f"note: {INTEGRITY_NOTE}")
            if unchecked:
                echo(f"note: {SIGNATURE} is present but was not checked (pass --allowed-signers FILE)")
        if findings:
            echo(f"{directory}: {len(findings)} problem(s)", err=True)
        sys.exit(EXIT_FINDINGS if findings else EXIT_OK)

    @group.command("sign")
    @click.argument("directory", type=click.Path(path_type=Path))
    @click.option(
        "--key",
        "key",
        type=click.Path(path_type=Path),
        required=True,
        metavar="KEY",
        help="Your SSH key: a private key file, or a .pub whose private key is in ssh-agent. Sign on your "
        "own machine after copying the report off: a key on the provider's machine proves nothing.",
    )
    @json_option("Print {format, command, ok, findings, directory, signature, namespace} as JSON.")
    @handle_errors
    def report_sign(directory: Path, key: Path, as_json: bool) -> None:
        """Sign a copied report DIRECTORY's MANIFEST.sha256 with your SSH key (ssh-keygen -Y sign, namespace
        envbuild-report); the signature is MANIFEST.sha256.sig beside it.

        Exit 0 signed, 1 the report does not match its manifest (nothing signed), 2 a bad key or folder,
        3 no usable ssh-keygen.
        """
        from envbuild.report.sign import NAMESPACE, sign_report

        path = sign_report(directory, key)
        if as_json:
            print_json(
                envelope(
                    "report sign",
                    ok=True,
                    findings=(),
                    directory=str(directory),
                    signature=str(path),
                    namespace=NAMESPACE,
                )
            )
        else:
            echo(f"signed {directory / MANIFEST} -> {path} (namespace {NAMESPACE})")
        sys.exit(EXIT_OK)

    @group.command("diff")
    @click.argument("a", type=click.Path(path_type=Path))
    @click.argument("b", type=click.Path(path_type=Path))
    @json_option(
        "Print {format, command, ok, findings, differences, changes, notes, noise} as JSON (ok: no "
        "differences); changes: {kind, name, a, b, text}; notes (also info findings): what could not be "
        "compared."
    )
    @handle_errors
    def report_diff(a: Path, b: Path, as_json: bool) -> None:
        """Compare two reports: result, lock, stage statuses, every installed distribution (declared and
        transitive), the hardware (CPUs, devices and their UUIDs, driver), torch/Python/OS/glibc/kernel, and
        stage timings beyond noise (more than 1 s AND more than 50 % apart).

        Exit 0 same, 1 different, 2 when either is not a readable report (so "different" stays unambiguous).
        """
        from envbuild.errors import ReportError
        from envbuild.report.diff import TIMING_MIN_S, TIMING_RATIO, compare_reports
        from envbuild.report.verify import check_report

        try:
            checked = check_report(a), check_report(b)
        except ReportError as exc:
            raise UsageError(exc.message) from None
        result = compare_reports(checked[0].report, checked[1].report)  # verdicts derived, not stored
        diffs = [c.text for c in result.changes]
        unverified = [
            f"{which} ({path}): {problem}"
            for which, path, c in (("A", a, checked[0]), ("B", b, checked[1]))
            for problem in c.problems
        ]
        if as_json:
            notes = [
                {"severity": "warning", "code": "W-REPORT-UNVERIFIED", "message": u, "source": None}
                for u in unverified
            ]
            notes += [
                {"severity": "info", "code": "I-DIFF-PARTIAL", "message": n, "source": None}
                for n in result.notes
            ]
            print_json(
                envelope(
                    "report diff",
                    ok=not diffs,
                    findings=notes,
                    differences=diffs,
                    changes=[asdict(c) for c in result.changes],
                    notes=list(result.notes),
                    noise={"min_seconds": TIMING_MIN_S, "min_ratio": TIMING_RATIO},
                )
            )
        else:
            for line in unverified:
                echo(f"warning: W-REPORT-UNVERIFIED: {line}")
            for line in diffs:
                echo(line)
            if not diffs:
                echo("no differences")
            for note in result.notes:
                echo(f"note: {note}")
        sys.exit(EXIT_FINDINGS if diffs else EXIT_OK)

    @group.command("fleet")
    @click.argument("runs", nargs=-1, required=True, type=click.Path(path_type=Path))
    @json_option("Print {format, command, ok, findings, lots, stages, outliers, notes, thresholds} as JSON.")
    @click.option(
        "--html",
        "html",
        type=click.Path(path_type=Path),
        default=None,
        metavar="FILE",
        help="Also write the table as one self-contained HTML page (no script, nothing loaded) to FILE.",
    )
    @handle_errors
    def report_fleet(runs: tuple[Path, ...], as_json: bool, html: Path | None) -> None:
        """Put the runs of one order's lots side by side (RUN: a report folder each), and flag outliers.

        Columns: verdict, first failure, driver, GPU names and UUIDs, a hash of the installed package set,
        each stage's seconds and the total.  A number is an outlier when it is more than 3 MADs from the
        lots' median AND more than 10 % away from it; a verdict, driver, GPU name or package set when the
        majority of the lots does not share it; a GPU UUID seen in two lots.  Exit 0 every lot passed and
        nothing stands out, 1 otherwise, 2 a RUN that is not a readable report.
        """
        from envbuild.errors import ReportError
        from envbuild.report.fleet import load_fleet, render_html, to_json_data

        try:
            fleet = load_fleet(list(runs))
        except ReportError as exc:
            raise UsageError(exc.message) from None
        if html is not None:
            try:
                atomic_write(html, render_html(fleet))
            except OSError as exc:
                raise UsageError(f"--html {html}: cannot write: {exc.strerror or exc}") from None
        if as_json:
            findings = [
                {"severity": "warning", "code": "W-FLEET-OUTLIER", "message": o.text, "source": None}
                for o in fleet.outliers
            ]
            print_json(envelope("report fleet", ok=fleet.ok, findings=findings, **to_json_data(fleet)))
        else:
            _print_fleet(fleet)
        if html is not None:
            echo(f"envbuild: wrote {html}", err=True)
        sys.exit(EXIT_OK if fleet.ok else EXIT_FINDINGS)


def _verdict_problems(directory: Path) -> list[str]:
    """``report verify``: where report.json's stored verdict disagrees with its stages (a report.json
    that does not read is the manifest check's to name, or says so here)."""
    from envbuild.errors import ReportError
    from envbuild.report.verify import parse_report, verdict_problems

    if not (directory / "report.json").is_file():
        return []  # a missing report.json is named by the manifest check
    try:
        return verdict_problems(parse_report(directory))
    except ReportError as exc:
        return [exc.message]


def _print_fleet(fleet: object) -> None:
    """The lots' table: every string from a report goes through :func:`markup` (escaped, never read as
    rich markup or run as a terminal escape)."""
    from rich.table import Table

    from envbuild.cli.output import console as make_console
    from envbuild.cli.output import markup as escape
    from envbuild.report.fleet import Fleet, flagged, stage_cell
    from envbuild.untrusted import one_line

    assert isinstance(fleet, Fleet)
    marks = flagged(fleet)

    def cell(text: str, flag: bool, multiline: bool = False) -> str:  # "!": an outlier, without colour
        shown = escape(text, multiline=multiline)
        return f"[bold red]{shown} ![/]" if flag else shown

    lots = Table(title=f"envbuild report fleet — {len(fleet.lots)} lots")
    lots.add_column("lot", no_wrap=True)
    lots.add_column("verdict", no_wrap=True)
    columns = ("first failure", "driver", "GPUs", "GPU UUIDs", "packages (sha256, count)", "hardware rules")
    for col in (*columns, "fleet node"):
        lots.add_column(col, overflow="fold")
    times = Table(title="seconds per stage")
    times.add_column("lot", no_wrap=True)
    for stage in fleet.stages:  # a stage's name is a report's too
        times.add_column(escape(stage), justify="right", no_wrap=True)
    times.add_column("total", justify="right", no_wrap=True)
    for lot in fleet.lots:
        cols = marks.get(lot.lot, set())
        style = _STYLE["passed" if lot.verdict == "PASSED" else "failed"]
        lots.add_row(
            escape(lot.lot),
            f"[{style}]{lot.verdict}[/]" + (" !" if "verdict" in cols else ""),
            escape(lot.first_failure or "-"),
            cell(lot.driver or "-", "driver" in cols),
            cell(", ".join(lot.gpu_names) or "none", "gpu names" in cols),
            cell("\n".join(map(one_line, lot.gpu_uuids)) or "none", "gpu uuid" in cols, multiline=True),
            cell(f"{lot.packages} ({lot.package_count})" if lot.packages else "unknown", "packages" in cols),
            cell(lot.hardware or "not read", "hardware" in cols),
            cell(lot.node or "-", "fleet group" in cols),
        )
        times.add_row(
            escape(lot.lot),
            *(cell(stage_cell(lot, s), f"stage {s} s" in cols) for s in fleet.stages),
            cell(f"{lot.total_s:.2f}", "total s" in cols),
        )
    console = make_console()
    if not console.is_terminal:  # a file or a pipe: the lines whole, not folded at 80 columns
        console.width = max(console.width, 160)
    console.print(lots, markup=True)
    console.print(times, markup=True)
    figures = list(dict.fromkeys(k for lot in fleet.lots for k in lot.perf))
    if figures:
        perf = Table(title="performance stage")
        perf.add_column("figure", overflow="fold")
        for lot in fleet.lots:
            perf.add_column(escape(lot.lot), justify="right", no_wrap=True)
        for key in figures:
            perf.add_row(
                escape(key),
                *(
                    cell(f"{lot.perf[key]:g}" if key in lot.perf else "-", key in marks.get(lot.lot, set()))
                    for lot in fleet.lots
                ),
            )
        console.print(perf, markup=True)
    for o in fleet.outliers:
        console.print(f"outlier: {escape(o.text)}", markup=True, soft_wrap=True)
    for note in fleet.notes:
        console.print(f"note: {escape(note)}", markup=True, soft_wrap=True)
    n, failed = len(fleet.lots), sum(1 for lot in fleet.lots if lot.verdict != "PASSED")
    passed = f"[red]{failed} of {n} lots did not pass[/]" if failed else f"[green]all {n} lots passed[/]"
    count = len(fleet.outliers)
    outliers = f"[yellow]{count} outlier{'s' if count != 1 else ''}[/]" if count else "no outliers"
    console.print(f"{passed}; {outliers}", markup=True)
