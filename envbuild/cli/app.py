"""The click group, its shared options and error handling, and how the command line is run.

The command modules (``envbuild.cli._build`` ...) import what they share from here and register their
commands on :data:`cli`; ``envbuild.cli`` imports them all, so nothing imports back into the package.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from envbuild import __version__
from envbuild.errors import EnvbuildError

F = TypeVar("F", bound=Callable[..., Any])


def handle_errors(func: F) -> F:
    """Turn an :class:`EnvbuildError` into a clear message on stderr and its exit code (with ``--json``,
    also the ``ok: false`` object on stdout)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except EnvbuildError as exc:
            if kwargs.get("as_json"):
                from envbuild.cli.output import envelope, error_findings, print_json

                command = click.get_current_context().command_path.split(" ", 1)[-1]
                print_json(envelope(command, ok=False, findings=error_findings(exc)))
            click.echo(f"envbuild: error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("envbuild: interrupted", err=True)
            sys.exit(130)

    return wrapper  # type: ignore[return-value]


def json_option(help: str) -> Callable[[F], F]:
    """``--json``: the command's result as one JSON object on stdout (see :mod:`envbuild.cli.output`)."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def verbose_option(
    help: str = "Also show each finding's source (catalog row, metadata, URL).",
) -> Callable[[F], F]:
    return click.option("-v", "--verbose", is_flag=True, help=help)


CONTEXT = {"help_option_names": ["-h", "--help"]}


@click.group(context_settings=CONTEXT)
@click.version_option(
    __version__, "-V", "--version", prog_name="envbuild", message="%(prog)s, version %(version)s"
)
def cli() -> None:
    """Render, build and validate containerised GPU environments for rented machines.

    The result goes to stdout, progress to stderr; --json prints one object (docs/output.schema.json).
    Exit 0 ok, 1 error findings or a failed validation, 2 usage or input error, 3 engine, network or
    environment error."""


def main(argv: Sequence[str] | None = None) -> None:
    run(sys.argv[1:] if argv is None else list(argv))


def run(argv: Sequence[str]) -> None:
    """Parse ``argv`` (without the program name), run the command, exit with its status."""
    cli.main(args=list(argv), prog_name="envbuild")


def parse(argv: Sequence[str]) -> tuple[click.Command, dict[str, Any]]:
    """The command ``argv`` names and its parameters, as :func:`run` would call it, without running it
    (a usage error exits 2)."""
    try:
        ctx = cli.make_context("envbuild", list(argv))
        command: click.Command = cli
        args = [*ctx._protected_args, *ctx.args]
        while isinstance(command, click.Group):
            _, found, args = command.resolve_command(ctx, args)
            assert found is not None
            command = found
            ctx = command.make_context(command.name, args, parent=ctx)
            args = [*ctx._protected_args, *ctx.args]
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    return command, ctx.params
