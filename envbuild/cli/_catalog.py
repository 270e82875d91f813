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
        rows = [c.model_dump(mode="json") for c in cards]
        click.echo(json.dumps(rows, indent=2, sort_keys=True))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="envbuild targets (catalog: envbuild/data/cards.toml)")
    for col in (
        "id",
        "name",
        "vendor",
        "arch",
        "memory GiB",
        "cards/lot",
        "bf16 TFLOP/s",
        "min CUDA/ROCm",
        "tier",
    ):
        table.add_column(col)
    for c in cards:
        table.add_row(
            c.id,
            c.name,
            c.vendor,
            c.arch or "-",
            f"{c.memory_gib:g}",
            str(c.cards_per_lot),
            f"{c.bf16_tflops:g}" if c.bf16_tflops else "-",
            c.min_cuda or c.min_rocm or "-",
            c.tier,
        )
    Console().print(table)
