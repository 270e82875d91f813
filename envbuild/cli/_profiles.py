"""``envbuild profiles [--json]``: the built-in profiles; ``envbuild schema``: the profile's JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path

import click

from envbuild.cli.app import cli, handle_errors, json_option


@cli.command("profiles")
@json_option("Print a JSON list instead of a table.")
@handle_errors
def profiles_command(as_json: bool) -> None:
    """List the built-in profiles (name, kind, description)."""
    from envbuild.profile import describe_builtins

    rows = describe_builtins()
    if as_json:
        data = [{"name": name, "kind": kind, "description": text} for name, kind, text in rows]
        click.echo(json.dumps(data, indent=2))
        return
    from rich.table import Table
    from rich.text import Text

    from envbuild.cli.output import console

    table = Table(title="Built-in profiles", title_justify="left")
    table.add_column("name", style="bold", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    table.add_column("description")
    for name, kind, text in rows:
        table.add_row(Text(name), Text(kind), Text(text))  # Text: no markup parsing
    console().print(table)
    click.echo("Use a name with `envbuild check NAME` or `envbuild render NAME`, or a path to a .toml file.")


@cli.command("schema")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write it to this file (default: print it).",
)
@handle_errors
def schema_command(out: Path | None) -> None:
    """Print the profile's JSON Schema, for TOML editors (taplo: `#:schema ./FILE.schema.json`)."""
    from envbuild.profile.jsonschema import schema_text

    text = schema_text()
    if out is None:
        click.echo(text, nl=False)
        return
    from envbuild.errors import UsageError

    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{out}: cannot write the schema: {exc.strerror or exc}") from None
    click.echo(f"wrote {out}")
