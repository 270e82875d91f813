"""``envbuild targets [--json]``: the cards envbuild can plan for, from the sourced catalog."""

from __future__ import annotations

import json

import click

from envbuild.boundary import to_data
from envbuild.cli.app import cli, handle_errors, json_option
from envbuild.cli.output import envelope, print_json


@cli.command("targets")
@json_option("Print the cards as a JSON list (the catalog's rows).")
@handle_errors
def targets(as_json: bool) -> None:
    """List the target cards (ids for --target and accelerator.targets)."""
    from envbuild.catalog import load_catalog

    cards = load_catalog().cards
    if as_json:
        click.echo(json.dumps(to_data(cards), indent=2, sort_keys=True))
        return
    from rich import box
    from rich.table import Table

    from envbuild.cli.output import console

    # ids, archs and numbers are what users copy: they never wrap or get cut; the name goes last and wraps.
    rows: list[tuple[str, ...]] = [
        (
            c.id,
            c.vendor,
            c.arch or "-",
            f"{c.memory_gib:g}",
            str(c.cards_per_lot),
            f"{c.bf16_tflops:g}" if c.bf16_tflops else "-",
            c.min_cuda or c.min_rocm or "-",
            c.tier,
        )
        for c in cards
    ]
    heads = ("id", "vendor", "arch", "GB", "lot", "TFLOP/s", "min CUDA/ROCm", "tier")
    table = Table(
        title="envbuild targets (catalog: envbuild/data/cards.toml)",
        caption="GB: memory per card, as the vendor states it; lot: cards per rental lot; "
        "min CUDA/ROCm: the oldest toolkit that supports the card",
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
    )
    for i, head in enumerate(heads):
        table.add_column(head, no_wrap=True, min_width=max(len(head), *(len(r[i]) for r in rows)))
    table.add_column("name", ratio=1)
    for row, card in zip(rows, cards, strict=True):
        table.add_row(*row, card.name)
    console().print(table)


@cli.group("catalog")
def catalog() -> None:
    """The catalog in force: refresh the user overlay from the package indexes, show what is known."""


@catalog.command("refresh")
@json_option(
    "Print {format, command, ok, findings} with the releases found, the new ones and the indexes read."
)
@click.option(
    "--index-url",
    default="https://pypi.org/simple",
    show_default=True,
    metavar="URL",
    help="The package index (PEP 691 JSON simple API).",
)
@click.option(
    "--torch-index",
    default="https://download.pytorch.org/whl",
    show_default=True,
    metavar="URL",
    help="The PyTorch index (per-variant PEP 503 pages).",
)
@handle_errors
def refresh(as_json: bool, index_url: str, torch_index: str) -> None:
    """Read torch, torchvision, torchaudio, triton and bpy releases from the indexes into the overlay."""
    from envbuild.catalog.refresh import refresh as run

    result = run(index_url, torch_index)
    if as_json:
        print_json(envelope("catalog refresh", ok=True, findings=(), **result.as_json()))
        return
    o = result.overlay
    found = result.found()
    new = result.new_vs_builtin()
    click.echo(f"wrote {result.path} ({result.seconds:.1f} s)")
    for index in o.indexes:
        click.echo(f"  {index.kind} {index.url}: " + ("read" if index.ok else f"NOT read ({index.error})"))
    for name, versions in found.items():
        fresh = new[name]
        tail = f", not in the built-in catalog: {', '.join(fresh)}" if fresh else ""
        click.echo(f"  {name}: {len(versions)} releases{tail}")
    since = result.new_vs_previous()
    if since is None:
        click.echo("  no previous overlay")
    else:
        fresh = [f"{name} {v}" for name, versions in since.items() for v in versions]
        click.echo(f"  new since the previous overlay: {', '.join(fresh) or 'none'}")
    unconfirmed = [r.version for r in o.torch if not r.confirmed]
    if unconfirmed:
        click.echo(f"  torch without metadata on the index (unconfirmed): {', '.join(unconfirmed)}")
    for line in result.state.unusable:
        click.echo(f"  not usable: {line}")
    for line in result.state.disagreements:
        click.echo(f"  disagrees with the built-in catalog (built-in kept): {line}")
    if result.previous_error:
        click.echo(f"  the previous overlay was not readable and was replaced: {result.previous_error}")


@catalog.command("show")
@json_option("Print what is in force as JSON.")
@handle_errors
def show(as_json: bool) -> None:
    """What is in force: the built-in data files, the overlay, torch releases and Blender versions."""
    from envbuild.catalog.show import describe, render_text

    data = describe()
    if as_json:
        click.echo(json.dumps(data, indent=2, sort_keys=True))
    else:
        click.echo(render_text(data))
