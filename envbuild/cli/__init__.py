"""The command line: parse arguments, call the stages, print, map errors to exit codes.

Each group of commands lives in its own module and registers itself on :data:`cli`.  Nothing here
imports torch or docker at start-up: ``check`` and ``render`` must stay fast in a cold process.
"""

from __future__ import annotations

import functools
import gc
import importlib
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from envbuild import __version__
from envbuild.errors import EXIT_USAGE, EnvbuildError

F = TypeVar("F", bound=Callable[..., Any])


def handle_errors(func: F) -> F:
    """Turn an :class:`EnvbuildError` into a clear message on stderr and its exit code."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except EnvbuildError as exc:
            click.echo(f"envbuild: error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("envbuild: interrupted", err=True)
            sys.exit(130)

    return wrapper  # type: ignore[return-value]


# Each command's module, imported when the command is looked up: a cold `check` does not pay for the
# modules of `build` or `validate`.  A name not listed here (a typo, or a command added without an
# entry) loads every module first, so no command can go missing.
COMMAND_MODULES = {
    "build": "_build",
    "catalog": "_catalog",
    "check": "_check",
    "fetch": "_build",
    "image": "_image",
    "lock": "_lock",
    "profiles": "_profiles",
    "rebuild": "_image",
    "render": "_render",
    "report": "_validate",
    "schema": "_profiles",
    "targets": "_catalog",
    "validate": "_validate",
}
MODULES = ("_build", "_catalog", "_check", "_image", "_lock", "_profiles", "_render", "_validate")


class _LazyGroup(click.Group):
    def _load(self, modules: tuple[str, ...]) -> None:
        for module in modules:
            importlib.import_module(f"{__name__}.{module}")

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMAND_MODULES.get(cmd_name)
        self._load((module,) if module else MODULES)
        command = super().get_command(ctx, cmd_name)
        if command is None and module:
            self._load(MODULES)
            command = super().get_command(ctx, cmd_name)
        return command

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load(MODULES)
        return super().list_commands(ctx)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="envbuild")
def cli() -> None:
    """Render, build and validate containerised GPU environments for rented machines."""


def main() -> None:
    try:
        _main()
    finally:
        # The process ends here.  Freezing the heap spares the interpreter's last full garbage
        # collection, which walks every object the imports made (pydantic's schemas among them): ~30 ms
        # of a cold `check`.  Objects still referenced are torn down as before, atexit handlers and the
        # flushing of stdout/stderr still run; only unreachable cycles are left to the OS at exit.
        gc.freeze()


def _main() -> None:
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_USAGE)
    except click.exceptions.Abort:
        click.echo("envbuild: aborted", err=True)
        sys.exit(130)
    sys.exit(0)
