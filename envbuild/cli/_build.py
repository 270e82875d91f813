"""Commands ``envbuild fetch`` and ``envbuild build`` (see :mod:`envbuild.image`).

Exit 0 done, 1 a failed build or fetch (a hash that differs from the lock), 2 bad input, 3 no engine or
an index that cannot be read."""

from __future__ import annotations

from pathlib import Path

import click

from envbuild.cli._lock import index_options, links
from envbuild.cli.app import cli, handle_errors, json_option
from envbuild.cli.output import envelope, print_json


def _say(message: str) -> None:
    click.echo(f"envbuild: {message}", err=True)


@cli.command("fetch")
@click.argument("bundle", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--wheelhouse",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where to put the wheels (default BUNDLE/wheelhouse).",
)
@click.option(
    "--tools/--no-tools",
    default=True,
    help="Also fill BUNDLE/tools with envbuild's own wheel and its locked dependencies (the validator the "
    "image installs); --no-tools leaves them out (default: --tools).",
)
@click.option(
    "--blender-tarball",
    default=None,
    metavar="PATH|URL",
    help="The official Blender tarball from here instead of download.blender.org (blender.source = "
    "'official'); checked against the catalog's pinned sha256 for the release (where one is published), "
    "the sha256 the bundle's lock recorded at its first fetch, and blender-X.Y.Z.sha256 beside it.",
)
@index_options
@json_option(
    "Print {format, command, ok, findings, wheelhouse, wheels, tools, ...} as JSON (also on failure)."
)
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
@handle_errors
def fetch_command(
    bundle: Path,
    wheelhouse: Path | None,
    tools: bool,
    blender_tarball: str | None,
    index_urls: tuple[str, ...],
    find_links: tuple[str, ...],
    as_json: bool,
    quiet: bool,
) -> None:
    """Download exactly the files BUNDLE's lock names (locking it first if needed), checking each hash;
    with an official Blender, its tarball too."""
    from envbuild.image.fetch import fetch

    result = fetch(
        bundle,
        wheelhouse,
        tools=tools,
        index_urls=index_urls,
        find_links=links(find_links),
        say=(lambda m: None) if quiet else _say,
        blender_tarball=blender_tarball,
    )
    if as_json:
        blender = result.blender
        print_json(
            envelope(
                "fetch",
                ok=True,
                findings=(),
                locked=result.locked,
                wheelhouse=str(result.wheelhouse),
                wheels=list(result.wheels),
                tools=list(result.tools),
                blender={"tarball": blender.tarball, "checksums": blender.checksums} if blender else None,
                seconds=round(result.seconds, 2),
            )
        )
        return
    click.echo(
        ("locked the bundle, then " if result.locked else "")
        + f"fetched {len(result.wheels)} wheel(s) into {result.wheelhouse}"
        + (f" and {len(result.tools)} into {bundle / 'tools'}" if tools else "")
        + (f", Blender's {result.blender.tarball} (sha256 checked)" if result.blender else "")
        + f" in {result.seconds:.1f} s"
    )


@cli.command("build")
@click.argument("bundle_or_profile")
@click.option("--tag", "-t", required=True, help="Name of the image to build (name[:tag]).")
@click.option("--base-image", default=None, help="Override the Dockerfile's BASE_IMAGE build argument.")
@click.option(
    "--wheelhouse",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="Install from this wheelhouse instead of BUNDLE/wheelhouse.",
)
@click.option(
    "--ca-cert",
    "ca_certs",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Extra CA certificate (PEM) trusted by apt and pip while building; repeatable. Never written into "
    "the bundle, and left out of the final image unless --keep-ca-cert.",
)
@click.option(
    "--keep-ca-cert",
    is_flag=True,
    help="Keep the --ca-cert certificates in the final image's trust store (default: build stages only).",
)
@click.option("--network", default=None, help="Network for RUN steps: bridge, default, host or none.")
@click.option("--no-cache", is_flag=True, help="Rebuild every layer.")
@click.option(
    "--target", "targets", multiple=True, metavar="ID", help="Target card id (profile refs only); repeatable."
)
@click.option(
    "--fetch/--no-fetch",
    "do_fetch",
    default=None,
    help="Fill the wheelhouse first, locking the bundle when it is not (default: yes for a profile ref "
    "without --wheelhouse). Without it, an unlocked bundle is refused.",
)
@click.option("--force", is_flag=True, help="Render a profile even with error findings.")
@click.option("--quiet", "-q", is_flag=True, help="No live progress, step titles only.")
@click.option(
    "--record",
    "record_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where to write the build record (default: beside the build log, BUNDLE/build-TAG.record.json).",
)
@click.option("--no-record", is_flag=True, help="Do not record the image (no docker save, no file hashing).")
@index_options
@json_option("Print {format, command, ok, findings, tag, image_id, seconds, log, record, run} as JSON.")
@handle_errors
def build_command(
    bundle_or_profile: str,
    tag: str,
    base_image: str | None,
    wheelhouse: Path | None,
    ca_certs: tuple[Path, ...],
    keep_ca_cert: bool,
    network: str | None,
    no_cache: bool,
    targets: tuple[str, ...],
    do_fetch: bool | None,
    force: bool,
    quiet: bool,
    record_path: Path | None,
    no_record: bool,
    index_urls: tuple[str, ...],
    find_links: tuple[str, ...],
    as_json: bool,
) -> None:
    """Build BUNDLE_OR_PROFILE (a rendered bundle, a built-in profile or a .toml) into an image."""
    from envbuild.image.build import build_image, check_build_args, check_locked
    from envbuild.image.cache import render_cached, resolve_source
    from envbuild.image.context import check_context
    from envbuild.image.engine import api_client
    from envbuild.image.fetch import fetch
    from envbuild.image.wheelhouse import verify_wheelhouse
    from envbuild.models import check_bundle

    check_build_args(tag, base_image, network, ca_certs)  # before rendering, fetching or the engine
    bundle, result = resolve_source(bundle_or_profile, targets)
    checked = False  # the wheelhouse matches the lock (checked here, or filled by fetch)
    if result is None:
        lock = check_bundle(bundle)  # an incomplete bundle or a damaged lock: exit 2 before the engine
        check_context(bundle, wheelhouse)  # a secret added to the bundle after render: exit 2, no engine
        if not do_fetch:  # unlocked, or not installable offline: exit 2 before the engine
            check_locked(bundle, lock, wheelhouse if wheelhouse is not None else bundle / "wheelhouse")
            verify_wheelhouse(lock, wheelhouse if wheelhouse is not None else bundle / "wheelhouse")
            checked = True
    api = api_client()  # no engine: say so before rendering or downloading anything
    rendered = result is not None
    if result is not None:
        render_cached(bundle, result, targets, force)
        _say(f"rendered {bundle_or_profile} into {bundle}")
    if do_fetch is None:
        do_fetch = rendered and wheelhouse is None
    if do_fetch:
        checked = True
        fetched = fetch(bundle, wheelhouse, index_urls=index_urls, find_links=links(find_links), say=_say)
        _say(f"fetched {len(fetched.wheels)} wheel(s) + {len(fetched.tools)} tool wheel(s)")
    house = wheelhouse if wheelhouse is not None else bundle / "wheelhouse"
    if not any(house.glob("*.whl")):
        _say(
            f"warning: {house} holds no wheels, so pip inside the build needs the package index "
            f"(and, behind TLS interception, --ca-cert); `envbuild fetch {bundle}` makes the build offline"
        )
    if not (bundle / "tools" / "requirements.txt").is_file():
        _say(
            f"warning: {bundle / 'tools'} holds no tools/requirements.txt (envbuild's wheel and its locked "
            f"dependencies), so the image gets no validator (/usr/local/bin/envbuild); "
            f"`envbuild fetch {bundle}` adds it"
        )
    built = build_image(
        bundle,
        tag,
        base_image=base_image,
        wheelhouse=wheelhouse,
        ca_certs=ca_certs,
        network=network,
        no_cache=no_cache,
        progress=not quiet,
        client=api,
        wheels_checked=checked,
        keep_ca_cert=keep_ca_cert,
    )
    for note in built.built_notes:  # kept wheels no build record vouches for: compiled again
        _say(f"warning: {note}")
    if (bundle / "requirements-source.txt").is_file():  # [python] build_from_source: keep the wheels built
        _export_built(api, built.builder_image, bundle, recorded=not no_record)
    cached = f", {built.cached_steps}/{len(built.steps)} steps from cache" if built.steps else ""
    if not as_json:
        click.echo(
            f"built {built.tag} ({built.image_id[:19]}) in {built.seconds:.1f} s{cached}; log: {built.log}"
        )
    run_line = _run_line(bundle, built.tag)
    if run_line:
        _say(f"run it with: {run_line}")
    if not no_record:
        from envbuild.cli._image import write_record
        from envbuild.image.recording import record_path_for

        write_record(api, bundle, built.tag, base_image, record_path)
        record_path = record_path if record_path is not None else record_path_for(bundle, built.tag)
    if as_json:
        print_json(
            envelope(
                "build",
                ok=True,
                findings=(),
                tag=built.tag,
                image_id=built.image_id,
                seconds=round(built.seconds, 2),
                steps=len(built.steps),
                cached_steps=built.cached_steps,
                log=str(built.log),
                record=None if no_record or record_path is None else str(record_path),
                run=run_line,
            )
        )


def _export_built(api: object, builder_image: str | None, bundle: Path, *, recorded: bool) -> None:
    """Copy the builder stage's built wheels to ``bundle/built-wheels/`` for the next build with the same
    key; the build record this build writes (``recorded``) is what vouches for them then."""
    from envbuild.image.built_cache import BUILT, export_built

    if builder_image is None:
        _say("warning: the builder stage's image is not in the build log: the built wheels were not kept")
        return
    wheels = export_built(api, builder_image, bundle)
    kept = ", ".join(wheels)
    if recorded:
        _say(f"kept the built wheel(s) {kept} in {bundle / BUILT} (a build with the same key reuses them)")
    else:
        _say(
            f"kept the built wheel(s) {kept} in {bundle / BUILT}; --no-record: no build record of this build "
            "vouches for them, so a next build reuses only those an earlier build record names"
        )


def _run_line(bundle: Path, tag: str) -> str | None:
    """The recommended ``docker run`` line for the built image (the README's, from the same rule)."""
    from envbuild.errors import LockError
    from envbuild.models import read_lock
    from envbuild.runopts import run_command

    try:
        lock = read_lock(bundle / "envbuild.lock.json")
    except LockError:
        return None  # the build itself checked the bundle; nothing to add
    return run_command(lock, tag)
