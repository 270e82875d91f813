"""``envbuild render PROFILE [--target ID]... [--driver VERSION] [--out DIR] [--force] [--json]``: check,
then write the bundle.  Exit 0 written, 1 error findings (nothing written), 2 bad input or usage."""

from __future__ import annotations

import shlex
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from envbuild.cli._check import order_options, order_summary, with_hours
from envbuild.cli.app import cli, handle_errors, json_option, verbose_option
from envbuild.cli.output import envelope, print_findings, print_json
from envbuild.errors import EXIT_FINDINGS

if TYPE_CHECKING:
    from envbuild.render.bundle import Written


def _display_path(value: str) -> str:
    """``value`` as typed, but relative to the working folder when it is an absolute path inside it."""
    path = Path(value)
    if not path.is_absolute():
        return value
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return value


def regenerate_command(
    ref: str,
    targets: tuple[str, ...],
    force: bool,
    days: int | None = None,
    prices: Path | None = None,
    bake: bool = False,
    apt_from: str | None = None,
    driver: str | None = None,
    hours: float | None = None,
) -> str:
    """The normalised command line recorded in the bundle (stable across machines for relative paths).

    It never names ``--out``: a bundle's bytes do not depend on where it is written.
    """
    words = ["envbuild", "render", _display_path(ref)]
    for target in targets:
        words += ["--target", target]
    if driver is not None:
        words += ["--driver", driver]
    if days is not None:
        words += ["--days", str(days)]
    if hours is not None:
        words += ["--hours", f"{hours:g}"]
    if prices is not None:
        words += ["--prices", _display_path(str(prices))]
    if apt_from is not None:
        words += ["--apt-from", _display_path(apt_from)]
    if bake:
        words.append("--bake")
    if force:
        words.append("--force")
    return shlex.join(words)


def rerender_notes(written: Written, out_text: str) -> list[str]:
    """What a re-render did with the previous bundle's lock and the user's edits (stderr lines)."""
    lines = [f"envbuild: warning: {note}" for note in written.recovered]
    lines += [
        f"envbuild: warning: app.source: skipped {item}: a bundle is never copied into the image's app"
        for item in written.skipped
    ]
    path = written.path
    if written.lock == "kept":
        lines.append(
            f"envbuild: note: {path}: the inputs did not change, so the lock `envbuild lock` resolved is "
            "kept (requirements-rebuild.txt, envbuild.lock.json, Dockerfile and README.md as lock wrote them)"
        )
    elif written.lock == "dropped":
        lines.append(
            f"envbuild: note: {path} was locked, and what it is rendered from changed: "
            f"{', '.join(written.changed)}. The lock was dropped (requirements-rebuild.txt and "
            f"envbuild.lock.json are the unresolved render); `envbuild lock {shlex.quote(out_text)}` "
            "restores it"
        )
    kept = [edit for edit in written.edits if edit.kept is not None]
    dropped = [edit for edit in written.edits if edit.kept is None]
    if kept:
        lines.append(
            f"envbuild: warning: {len(kept)} of your change(s) under app/ or constraints/ (render rewrites "
            f"those folders from the profile) moved to {path / 'kept-edits'}, which the image leaves out; "
            "make them in the profile's files to have them in the image:"
        )
        lines += [f"  - {edit.path} ({edit.why}) -> {edit.kept}" for edit in kept]
    if dropped:
        lines.append(
            f"envbuild: warning: --discard-edits: dropped {len(dropped)} of your change(s) under app/ or "
            "constraints/:"
        )
        lines += [f"  - {edit.path} ({edit.why})" for edit in dropped]
    if written.restored:
        lines.append(
            "envbuild: note: written again from the profile (they had been deleted from the bundle): "
            + ", ".join(written.restored)
        )
    return lines


@cli.command("render")
@click.argument("profile_ref", metavar="PROFILE")
@click.option("--target", "targets", multiple=True, metavar="ID", help="Target card id (repeatable).")
@click.option(
    "--driver",
    metavar="VERSION",
    help="NVIDIA driver version of the machine, e.g. 570.124.06 (checked, and recorded in the bundle).",
)
@click.option(
    "--out", "out", default=None, metavar="DIR", help="Bundle folder (default: ./<profile>-<targets>)."
)
@click.option("--force", is_flag=True, help="Write the bundle even when the check finds errors.")
@click.option("--bake", is_flag=True, help="Also write docker-bake.hcl (for BuildKit: docker buildx bake).")
@click.option(
    "--apt-from",
    metavar="RECORD",
    default=None,
    help="Pin apt packages to the versions a first build recorded (build-TAG.record.json).",
)
@click.option(
    "--discard-edits",
    is_flag=True,
    help="Drop your changes under the bundle's app/ and constraints/ (kept in kept-edits/ otherwise).",
)
@json_option("Print {format, command, ok, findings, bundle, order, notes} as JSON (also on failure).")
@verbose_option()
@order_options
@handle_errors
def render_command(
    profile_ref: str,
    targets: tuple[str, ...],
    driver: str | None,
    out: str | None,
    force: bool,
    bake: bool,
    apt_from: str | None,
    discard_edits: bool,
    days: int | None,
    hours: float | None,
    prices: Path | None,
    as_json: bool,
    verbose: bool,
) -> None:
    """Check PROFILE for the targets and write its build bundle (Dockerfile, lock, README, ...)."""
    from envbuild.catalog.prices import with_order
    from envbuild.plan import check
    from envbuild.profile import load_profile
    from envbuild.render import default_out, render_into

    profile = with_hours(load_profile(profile_ref), hours)
    checked = check(profile, targets=list(targets) or None, driver=driver)
    result = with_order(checked, days=days, price_file=prices)
    lines: list[str] = []  # what the human output adds to the findings, on stdout
    if apt_from is not None:
        from envbuild.image.record import read_record
        from envbuild.render.apt import apt_versions_from_record

        record = read_record(Path(apt_from))
        found = {a.name: a.version for a in record.files.apt}
        pins, missing = apt_versions_from_record(found, apt_from, result.plan)
        result = replace(result, plan=replace(result.plan, apt_recorded=pins))
        lines.append(f"apt: {len(pins)} package(s) pinned to the versions in {apt_from}")
        if missing:
            click.echo(f"envbuild: warning: not in {apt_from}, left unpinned: {', '.join(missing)}", err=True)
    order = order_summary(result)
    if not as_json:
        for line in lines:
            click.echo(line)
        print_findings(result.findings, verbose=verbose)
        for line in order:
            click.echo(f"order: {line}")
    if not result.ok and not force:
        message = "the check found errors; nothing written (use --force to render anyway)"
        if as_json:
            print_json(
                envelope("render", ok=False, findings=result.findings, bundle=None, order=order, notes=[])
            )
        click.echo(f"envbuild: error: {message}", err=True)
        sys.exit(EXIT_FINDINGS)
    out_text = out if out is not None else str(default_out(result.plan))
    command = regenerate_command(profile_ref, targets, force, days, prices, bake, apt_from, driver, hours)
    written = render_into(
        result,
        Path(out_text),
        command=command,
        force=force,
        bake=bake,
        targets=tuple(targets) or None,
        discard_edits=discard_edits,
        driver=driver,
    )
    if not result.ok:
        click.echo("envbuild: warning: rendered despite error findings (--force)", err=True)
    notes = rerender_notes(written, out_text)
    for line in notes:
        click.echo(line, err=True)
    if as_json:
        print_json(
            envelope(
                "render",
                ok=True,
                findings=result.findings,
                bundle=str(written.path),
                order=order,
                notes=notes,
            )
        )
    else:
        click.echo(f"wrote {written.path}")
