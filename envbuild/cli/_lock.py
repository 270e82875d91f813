"""``envbuild lock BUNDLE [--index-url URL]... [--find-links DIR]... [--json]``.

Exit 0 when the bundle was locked, 1 when the resolution has error findings (nothing written), 2 for a
bad bundle or usage, 3 when an index cannot be read or the resolver fails to run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from envbuild.boundary import to_data
from envbuild.cli.app import F, cli, handle_errors, json_option, verbose_option
from envbuild.cli.output import envelope, print_findings, print_json
from envbuild.errors import EXIT_FINDINGS
from envbuild.models import Plan

INDEX_HELP = "Resolve against this index instead of the bundle's (repeatable; the first is primary)."
FIND_LINKS_HELP = "Also take wheels from this folder or URL (repeatable)."


def index_options(func: F) -> F:
    """``--index-url`` and ``--find-links``, shared by ``lock``, ``fetch`` and ``check --resolve``."""
    links_option = click.option(
        "--find-links", "find_links", multiple=True, metavar="DIR|URL", help=FIND_LINKS_HELP
    )
    index_option = click.option("--index-url", "index_urls", multiple=True, metavar="URL", help=INDEX_HELP)
    return index_option(links_option(func))


def links(values: tuple[str, ...]) -> tuple[str, ...]:
    """Local --find-links folders as absolute paths (checked), URLs as given."""
    from envbuild.errors import UsageError

    out = []
    for value in values:
        if "://" in value:
            out.append(value)
            continue
        path = Path(value)
        if not path.is_dir():
            raise UsageError(
                f"--find-links {value}: not a folder (give a folder of wheels or an http(s) URL)"
            )
        out.append(str(path.resolve()))
    return tuple(out)


@cli.command("lock")
@click.argument("bundle", type=click.Path(file_okay=False, path_type=Path))
@index_options
@json_option("Print {format, command, ok, findings, plan, resolution, distributions} as JSON.")
@verbose_option()
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
@handle_errors
def lock_command(
    bundle: Path,
    index_urls: tuple[str, ...],
    find_links: tuple[str, ...],
    as_json: bool,
    verbose: bool,
    quiet: bool,
) -> None:
    """Resolve every distribution BUNDLE installs, for the image's target, and pin each with its hashes."""
    from envbuild.lock import lock_bundle

    outcome = lock_bundle(
        bundle,
        index_urls=index_urls,
        find_links=links(find_links),
        say=(lambda m: None) if quiet else (lambda m: click.echo(f"envbuild: {m}", err=True)),
    )
    resolved = outcome.resolved
    if as_json:
        print_json(
            envelope(
                "lock",
                ok=outcome.lock is not None,
                findings=outcome.findings,
                plan_changes=list(outcome.changed),
                plan=_plan_summary(outcome.plan) if outcome.plan is not None else None,
                resolution=to_data(resolved.resolution) if resolved is not None else None,
                distributions=to_data(resolved.distributions) if resolved is not None else [],
            )
        )
    else:
        print_findings(outcome.findings, verbose=verbose)
        if outcome.lock is not None and resolved is not None:
            for dist in resolved.distributions:
                via = ", ".join([*dist.declared_by, *dist.required_by])
                role = "" if dist.role == "install" else f"[{dist.role}] "  # the builder stage's, or an sdist
                click.echo(f"  {dist.spec:40} {role}{via}".rstrip())
            plan = outcome.plan
            if plan is not None:
                accel = f"{plan.backend} {plan.accelerator_version or ''}".rstrip()
                click.echo(
                    f"plan: base image {plan.base_image}; {accel}; min driver {plan.min_driver or '-'}"
                )
            follows = ", Dockerfile, README.md" if outcome.plan is not None else ""
            image = sum(1 for d in resolved.distributions if d.in_image)
            builder = len(resolved.distributions) - image
            click.echo(
                f"locked {image} distributions"
                + (f" (and {builder} for the builder stage only)" if builder else "")
                + f" in {outcome.seconds:.1f} s "
                f"({resolved.resolution.resolver}, {resolved.resolution.platform}): "
                f"{bundle / 'requirements-rebuild.txt'}, {bundle / 'envbuild.lock.json'}{follows}"
            )
    if outcome.lock is None:
        if not as_json:
            click.echo("envbuild: error: the bundle does not lock; nothing written", err=True)
        sys.exit(EXIT_FINDINGS)


def _plan_summary(plan: Plan) -> dict[str, object]:
    """The plan fields that resolution decides (the whole plan is in the lock)."""
    return {
        "backend": plan.backend,
        "accelerator_version": plan.accelerator_version,
        "torch_version": plan.torch_version,
        "torch_variant": plan.torch_variant,
        "base_image": plan.base_image,
        "min_driver": plan.min_driver,
        "torch_arch_list": list(plan.torch_arch_list),
    }
