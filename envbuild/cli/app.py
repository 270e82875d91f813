"""The click group, its shared options and error handling, and how the command line is run.

The command modules (``envbuild.cli._build`` ...) import what they share from here and register their
commands on :data:`cli`, which imports a module when its command is named (:class:`LazyGroup`), so
nothing imports back into the package.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import click

from envbuild import __version__
from envbuild.errors import EnvbuildError, ProfileError

F = TypeVar("F", bound=Callable[..., Any])


def handle_errors(func: F) -> F:
    """Turn an :class:`EnvbuildError` into a clear message on stderr and its exit code (with ``--json``,
    also the ``ok: false`` object on stdout)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except EnvbuildError as caught:
            exc = _with_pending(caught)
            if kwargs.get("as_json"):
                from envbuild.cli.output import envelope, error_findings, print_json

                command = click.get_current_context().command_path.split(" ", 1)[-1]
                print_json(envelope(command, ok=False, findings=error_findings(exc)))
            from envbuild.untrusted import terminal

            # an error may quote a capture, a report, a peer or a compiler: its escapes shown, not run
            click.echo(f"envbuild: error: {terminal(exc, multiline=True)}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("envbuild: interrupted", err=True)
            sys.exit(130)

    return wrapper  # type: ignore[return-value]


def _with_pending(exc: EnvbuildError) -> EnvbuildError:
    """A :class:`ProfileError` with its values that need the catalog judged and their problems added
    (:mod:`envbuild.profile.places`): every problem of a profile in one report."""
    if not isinstance(exc, ProfileError) or not exc.pending:
        return exc
    from envbuild.catalog import load_catalog
    from envbuild.profile.places import catalog_issues

    try:
        found = catalog_issues(load_catalog(), exc.pending)
    except EnvbuildError:  # a catalog that cannot be read: report what the profile's files show
        return exc
    return ProfileError([*exc.issues, *found]) if found else exc


def json_option(help: str) -> Callable[[F], F]:
    """``--json``: the command's result as one JSON object on stdout (see :mod:`envbuild.cli.output`)."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def verbose_option(
    help: str = "Also show each finding's source (catalog row, metadata, URL).",
) -> Callable[[F], F]:
    return click.option("-v", "--verbose", is_flag=True, help=help)


CONTEXT = {"help_option_names": ["-h", "--help"]}

# Each top-level command and the module that defines it.  The module is imported when its command is
# named (or when --help lists them all), so `envbuild check` does not pay for `build`'s imports.
COMMAND_MODULES: Mapping[str, str] = {
    "build": "envbuild.cli._build",
    "catalog": "envbuild.cli._catalog",
    "check": "envbuild.cli._check",
    "fetch": "envbuild.cli._build",
    "image": "envbuild.cli._image",
    "lock": "envbuild.cli._lock",
    "profiles": "envbuild.cli._profiles",
    "rebuild": "envbuild.cli._image",
    "render": "envbuild.cli._render",
    "report": "envbuild.cli._validate",
    "schema": "envbuild.cli._profiles",
    "targets": "envbuild.cli._catalog",
    "validate": "envbuild.cli._validate",
}


class LazyGroup(click.Group):
    """A group whose commands are imported when they are named: click's documented pattern for lazily
    loading subcommands (click.palletsprojects.com, "Advanced Groups and Context", "Lazily Loading
    Subcommands").  The command modules still register themselves with ``@cli.command``; this group
    imports the module a name maps to, then looks the command up as click does."""

    def __init__(self, *args: Any, lazy: Mapping[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            importlib.import_module(self.lazy[cmd_name])
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, lazy=COMMAND_MODULES, context_settings=CONTEXT)
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
