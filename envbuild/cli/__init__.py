"""The command line: parse arguments, call the stages, print, map errors to exit codes.

Each group of commands lives in its own module and registers itself on :data:`cli`.  Nothing here
imports torch or docker at start-up: ``check`` and ``render`` must stay fast in a cold process.
"""

from __future__ import annotations

import functools
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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="envbuild")
def cli() -> None:
    """Render, build and validate containerised GPU environments for rented machines."""


def main() -> None:
    from envbuild.cli import _build, _catalog, _check, _lock, _profiles, _render, _validate  # noqa: F401

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
