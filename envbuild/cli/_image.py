"""``envbuild image diff|record`` and ``envbuild rebuild BUNDLE --verify`` (see :mod:`envbuild.image.record`).

Exit 0 when the images are identical on content (after the documented noise), 1 when they differ,
2 for bad input, 3 when the engine cannot be reached.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from envbuild.cli.app import cli, handle_errors, json_option
from envbuild.cli.output import echo, envelope, print_json
from envbuild.errors import EXIT_FINDINGS, EXIT_OK

if TYPE_CHECKING:
    from envbuild.image.record import ImageFiles, Record

_BASE_ARG = re.compile(r"^ARG BASE_IMAGE=(\S+)\s*$", re.MULTILINE)


def _say(message: str) -> None:
    click.echo(f"envbuild: {message}", err=True)


def bundle_base_image(bundle: Path, override: str | None) -> str | None:
    """The base image a build of ``bundle`` starts from: ``--base-image`` or the Dockerfile's default."""
    if override:
        return override
    try:
        found = _BASE_ARG.search((bundle / "Dockerfile").read_text(encoding="utf-8"))
    except OSError:
        return None
    return found.group(1).strip("\"'") if found else None


def write_record(api: Any, bundle: Path, tag: str, base_image: str | None, path: Path | None) -> Record:
    """Record the image ``tag`` just built from ``bundle`` and write it (default beside the build log)."""
    from envbuild.image.recording import record_image, record_path_for

    started = time.monotonic()
    record = record_image(api, tag, bundle=bundle, base_image=bundle_base_image(bundle, base_image))
    target = path if path is not None else record_path_for(bundle, tag)
    record.write(target)
    _say(
        f"build record: {target} ({len(record.files.entries)} paths, {len(record.files.apt)} Debian "
        f"packages, {len(record.files.python)} Python distributions; {time.monotonic() - started:.1f} s)"
    )
    return record


def _side(api_holder: list[Any], ref: str) -> tuple[str, ImageFiles]:
    """A build record (a file) or an image in the engine, as its files."""
    from envbuild.image.record import read_record
    from envbuild.image.recording import image_files

    path = Path(ref)
    if path.suffix == ".json" or path.is_file():
        if not path.is_file():
            from envbuild.errors import UsageError

            raise UsageError(f"{ref}: no such build record")
        record = read_record(path)
        return f"{ref} (record of {record.tag})", record.files
    if not api_holder:
        from envbuild.image.engine import api_client

        api_holder.append(api_client())
    files, _, image_id = image_files(api_holder[0], ref)
    return f"{ref} ({image_id[:19]})", files


def _report(
    command: str, a_name: str, a: ImageFiles, b_name: str, b: ImageFiles, as_json: bool, limit: int
) -> int:
    from envbuild.image.diff import diff_files, format_diff

    diff = diff_files(a, b, a_name=a_name, b_name=b_name)
    if as_json:
        print_json(envelope(command, ok=diff.identical, findings=(), **diff.as_json()))
    else:
        for line in format_diff(diff, limit=limit):  # paths and package names from the images
            echo(line)
    return EXIT_OK if diff.identical else EXIT_FINDINGS


@cli.group("image")
def image_group() -> None:
    """Records of built images and their comparison on content."""


@image_group.command("diff")
@click.argument("a")
@click.argument("b")
@json_option("Print {format, command, ok, findings} and every difference as JSON (ok: identical).")
@click.option(
    "--limit", type=click.IntRange(min=0), default=50, show_default=True, help="Differing paths shown."
)
@handle_errors
def image_diff(a: str, b: str, as_json: bool, limit: int) -> None:
    """Compare A and B (image tags or build records) on content; exit 0 identical, 1 different.

    Package versions (dpkg, Python), file bytes, types, links, modes and owners are compared; timestamps
    never are.  Each differing path is attributed to the package that installed it."""
    api: list[Any] = []
    a_name, a_files = _side(api, a)
    b_name, b_files = _side(api, b)
    sys.exit(_report("image diff", a_name, a_files, b_name, b_files, as_json, limit))


@image_group.command("record")
@click.argument("image")
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Record file to write.",
)
@click.option(
    "--bundle",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="The bundle it was built from (adds the lock's and wheels' hashes as inputs).",
)
@click.option("--base-image", default=None, help="The base image it was built on (default: the bundle's).")
@handle_errors
def image_record(image: str, out: Path, bundle: Path | None, base_image: str | None) -> None:
    """Write the build record of IMAGE (an image in the engine) to --out."""
    from envbuild.image.engine import api_client
    from envbuild.image.recording import record_image

    api = api_client()
    base = bundle_base_image(bundle, base_image) if bundle is not None else base_image
    record = record_image(api, image, bundle=bundle, base_image=base)
    record.write(out)
    click.echo(f"recorded {image} ({record.image_id[:19]}): {len(record.files.entries)} paths -> {out}")


def reference_record(bundle: Path, against: Path | None) -> Path:
    """The record a rebuild is compared with: ``--against``, or the bundle's only record."""
    from envbuild.errors import UsageError

    if against is not None:
        return against
    found = sorted(bundle.glob("build-*.record.json"))
    if len(found) == 1:
        return found[0]
    if not found:
        raise UsageError(
            f"{bundle}: no build record to verify against; build it first (`envbuild build {bundle} --tag T` "
            "writes one) or pass --against RECORD"
        )
    names = ", ".join(p.name for p in found)
    raise UsageError(f"{bundle}: {len(found)} build records ({names}); choose one with --against")


@cli.command("rebuild")
@click.argument("bundle", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option(
    "--tag", "-t", default=None, help="Tag for the rebuilt image (default: the record's tag + '-rebuild')."
)
@click.option(
    "--verify", is_flag=True, help="Compare the rebuilt image with the bundle's record; exit 1 if it differs."
)
@click.option(
    "--against",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="The record to compare with (default: the bundle's only build-*.record.json).",
)
@click.option("--base-image", default=None, help="Override the Dockerfile's BASE_IMAGE build argument.")
@click.option("--network", default=None, help="Network for RUN steps: bridge, default, host or none.")
@json_option("Print {format, command, ok, findings} and the comparison as JSON (ok: identical).")
@click.option("--quiet", "-q", is_flag=True, help="No live progress, step titles only.")
@handle_errors
def rebuild_command(
    bundle: Path,
    tag: str | None,
    verify: bool,
    against: Path | None,
    base_image: str | None,
    network: str | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Rebuild BUNDLE without the cache and record it; with --verify, prove it equal to the first build."""
    from envbuild.image.build import build_image
    from envbuild.image.engine import api_client
    from envbuild.image.record import read_record

    reference = read_record(reference_record(bundle, against)) if verify or tag is None else None
    if base_image is None and reference is not None:
        base_image = (reference.inputs.get("base_image") or {}).get("ref")  # the same base as the first build
    if tag is None:
        assert reference is not None
        repo = reference.tag.rsplit(":", 1)[0] if ":" in reference.tag.split("/")[-1] else reference.tag
        tag = f"{repo}:rebuild"
    api = api_client()
    built = build_image(
        bundle, tag, base_image=base_image, network=network, no_cache=True, progress=not quiet, client=api
    )
    _say(f"rebuilt {built.tag} ({built.image_id[:19]}) without the cache in {built.seconds:.1f} s")
    record = write_record(api, bundle, built.tag, base_image, None)
    if not verify:
        if as_json:
            print_json(envelope("rebuild", ok=True, findings=(), tag=built.tag, image_id=built.image_id))
        return
    assert reference is not None
    if reference.inputs.get("lock_sha256") != record.inputs.get("lock_sha256"):
        _say("note: the bundle's lock changed since the reference build; differences may be expected")
    sys.exit(
        _report(
            "rebuild",
            f"{reference.tag} (recorded)",
            reference.files,
            f"{built.tag} (rebuilt)",
            record.files,
            as_json,
            50,
        )
    )
