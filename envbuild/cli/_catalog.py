"""``envbuild targets [--json]``: the cards envbuild can plan for, from the sourced catalog."""

from __future__ import annotations

import json

import click

from envbuild.cli import cli, handle_errors


@cli.command("targets")
@click.option("--json", "as_json", is_flag=True, help="Print the cards as JSON.")
@handle_errors
def targets(as_json: bool) -> None:
    """List the target cards (ids for --target and accelerator.targets)."""
    from envbuild.catalog import load_catalog

    cards = load_catalog().cards
    if as_json:
        click.echo(json.dumps([c.model_dump(mode="json") for c in cards], indent=2, sort_keys=True))
        return
    from rich import box
    from rich.console import Console
    from rich.table import Table

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
    heads = ("id", "vendor", "arch", "GiB", "lot", "TFLOP/s", "CUDA/ROCm", "tier")
    table = Table(
        title="envbuild targets (catalog: envbuild/data/cards.toml)", box=box.SIMPLE_HEAD, padding=(0, 1)
    )
    for i, head in enumerate(heads):
        table.add_column(head, no_wrap=True, min_width=max(len(head), *(len(r[i]) for r in rows)))
    table.add_column("name", ratio=1)
    for row, card in zip(rows, cards, strict=True):
        table.add_row(*row, card.name)
    Console().print(table)
