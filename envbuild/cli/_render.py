"""``envbuild render PROFILE [--target ID]... [--out DIR] [--force]``: check, then write the bundle."""

from __future__ import annotations

import shlex
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from envbuild.cli import cli, handle_errors
from envbuild.cli._check import order_options, order_summary
from envbuild.cli.args import argument, echo, option
from envbuild.errors import EXIT_FINDINGS
from envbuild.models import CheckResult

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
) -> str:
    """The normalised command line recorded in the bundle (stable across machines for relative paths).

    It never names ``--out``: a bundle's bytes do not depend on where it is written.
    """
    words = ["envbuild", "render", _display_path(ref)]
    for target in targets:
        words += ["--target", target]
    if days is not None:
        words += ["--days", str(days)]
    if prices is not None:
        words += ["--prices", _display_path(str(prices))]
    if apt_from is not None:
        words += ["--apt-from", _display_path(apt_from)]
    if bake:
        words.append("--bake")
    if force:
        words.append("--force")
    return shlex.join(words)


def print_findings(result: CheckResult) -> None:
    for finding in result.findings:
        stream_err = finding.severity == "error"
        echo(f"{finding.severity}: {finding.code}: {finding.message}", err=stream_err)


def rerender_notes(written: Written, out_text: str) -> list[str]:
    """What a re-render did with the previous bundle's lock and the user's edits (stderr lines)."""
    lines = [f"envbuild: warning: {note}" for note in written.recovered]
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
@argument("profile_ref", metavar="PROFILE")
@option("--target", "targets", multiple=True, metavar="ID", help="Target card id (repeatable).")
@option("--out", "out", default=None, metavar="DIR", help="Bundle folder [./<profile>-<targets>].")
@option("--force", is_flag=True, help="Write the bundle even when the check finds errors.")
@option("--bake", is_flag=True, help="Also write docker-bake.hcl (for BuildKit: docker buildx bake).")
@option(
    "--apt-from",
    metavar="RECORD",
    default=None,
    help="Pin apt packages to the versions a first build recorded (build-TAG.record.json).",
)
@option(
    "--discard-edits",
    is_flag=True,
    help="Drop your changes under the bundle's app/ and constraints/ (kept in kept-edits/ otherwise).",
)
@order_options
@handle_errors
def render_command(
    profile_ref: str,
    targets: tuple[str, ...],
    out: str | None,
    force: bool,
    bake: bool,
    apt_from: str | None,
    discard_edits: bool,
    days: int | None,
    prices: Path | None,
) -> None:
    """Check PROFILE for the targets and write its build bundle (Dockerfile, lock, README, ...)."""
    from envbuild.catalog.prices import with_order
    from envbuild.plan import check
    from envbuild.profile import load_profile
    from envbuild.render import default_out, render_into

    profile = load_profile(profile_ref)
    result = with_order(check(profile, targets=list(targets) or None), days=days, price_file=prices)
    if apt_from is not None:
        from envbuild.render.apt import apt_versions_from_record

        pins, missing = apt_versions_from_record(apt_from, result.plan)
        result = replace(result, plan=replace(result.plan, apt_recorded=pins))
        echo(f"apt: {len(pins)} package(s) pinned to the versions in {apt_from}")
        if missing:
            echo(f"envbuild: warning: not in {apt_from}, left unpinned: {', '.join(missing)}", err=True)
    print_findings(result)
    for line in order_summary(result):
        echo(f"order: {line}")
    if not result.ok and not force:
        message = "the check found errors; nothing written (use --force to render anyway)"
        echo(f"envbuild: error: {message}", err=True)
        sys.exit(EXIT_FINDINGS)
    out_text = out if out is not None else str(default_out(result.plan))
    command = regenerate_command(profile_ref, targets, force, days, prices, bake, apt_from)
    written = render_into(
        result,
        Path(out_text),
        command=command,
        force=force,
        bake=bake,
        targets=tuple(targets) or None,
        discard_edits=discard_edits,
    )
    if not result.ok:
        echo("envbuild: warning: rendered despite error findings (--force)", err=True)
    for line in rerender_notes(written, out_text):
        echo(line, err=True)
    echo(f"wrote {written.path}")
