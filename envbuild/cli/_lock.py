"""``envbuild lock BUNDLE [--index-url URL]... [--find-links DIR]... [--json]``.

Exit 0 when the bundle was locked, 1 when the resolution has error findings (nothing written) or the
resolver could not decide, 2 for a bad bundle or usage.
"""

from __future__ import annotations

import sys
from pathlib import Path

from envbuild.boundary import to_data
from envbuild.cli import F, cli, handle_errors
from envbuild.cli.args import argument, echo, option, path_type
from envbuild.errors import EXIT_FINDINGS
from envbuild.models import Plan

INDEX_HELP = "Resolve against this index instead of the bundle's (repeatable; the first is primary)."
FIND_LINKS_HELP = "Also take wheels from this folder or URL (repeatable)."


def index_options(func: F) -> F:
    """``--index-url`` and ``--find-links``, shared by ``lock``, ``fetch`` and ``check --resolve``."""
    links_option = option(
        "--find-links", "find_links", multiple=True, metavar="DIR|URL", help=FIND_LINKS_HELP
    )
    index_option = option("--index-url", "index_urls", multiple=True, metavar="URL", help=INDEX_HELP)
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
@argument("bundle", type=path_type(file_okay=False))
@index_options
@option("--json", "as_json", is_flag=True, help="Print {ok, findings, resolution, distributions}.")
@handle_errors
def lock_command(
    bundle: Path, index_urls: tuple[str, ...], find_links: tuple[str, ...], as_json: bool
) -> None:
    """Resolve every distribution BUNDLE installs, for the image's target, and pin each with its hashes."""
    from envbuild.lock import lock_bundle

    outcome = lock_bundle(
        bundle,
        index_urls=index_urls,
        find_links=links(find_links),
        say=lambda m: echo(f"envbuild: {m}", err=True),
    )
    resolved = outcome.resolved
    if as_json:
        payload = {
            "ok": outcome.lock is not None,
            "findings": to_data(outcome.findings),
            "plan_changes": list(outcome.changed),
            "plan": _plan_summary(outcome.plan) if outcome.plan is not None else None,
            "resolution": to_data(resolved.resolution) if resolved is not None else None,
            "distributions": to_data(resolved.distributions) if resolved is not None else [],
        }
        import json

        echo(json.dumps(payload, indent=2, sort_keys=True))
    else:
        for finding in outcome.findings:
            echo(f"{finding.severity}: {finding.code}: {finding.message}", err=finding.severity == "error")
        if outcome.lock is not None and resolved is not None:
            for dist in resolved.distributions:
                via = ", ".join([*dist.declared_by, *dist.required_by])
                echo(f"  {dist.spec:40} {via}")
            plan = outcome.plan
            if plan is not None:
                accel = f"{plan.backend} {plan.accelerator_version or ''}".rstrip()
                echo(f"plan: base image {plan.base_image}; {accel}; min driver {plan.min_driver or '-'}")
            follows = ", Dockerfile, README.md" if outcome.plan is not None else ""
            echo(
                f"locked {len(resolved.distributions)} distributions in {outcome.seconds:.1f} s "
                f"({resolved.resolution.resolver}, {resolved.resolution.platform}): "
                f"{bundle / 'requirements-rebuild.txt'}, {bundle / 'envbuild.lock.json'}{follows}"
            )
    if outcome.lock is None:
        if not as_json:
            echo("envbuild: error: the bundle does not lock; nothing written", err=True)
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
