"""The command line: parse arguments, call the stages, print, map errors to exit codes.

Each group of commands lives in its own module and registers itself on :data:`cli`.  Nothing here
imports torch or docker at start-up: ``check`` and ``render`` must stay fast in a cold process.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from envbuild import __version__
from envbuild.cli.args import Command, Group, echo
from envbuild.errors import EnvbuildError

F = TypeVar("F", bound=Callable[..., Any])


def handle_errors(func: F) -> F:
    """Turn an :class:`EnvbuildError` into a clear message on stderr and its exit code."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except EnvbuildError as exc:
            echo(f"envbuild: error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            echo("envbuild: interrupted", err=True)
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

cli = Group("envbuild", "Render, build and validate containerised GPU environments for rented machines.")


def load_commands(name: str | None) -> None:
    """Import the module of command ``name`` (every command module for None or an unlisted name)."""
    module = COMMAND_MODULES.get(name) if name is not None else None
    for each in (module,) if module else MODULES:
        importlib.import_module(f"{__name__}.{each}")


def main(argv: Sequence[str] | None = None) -> None:
    run(sys.argv[1:] if argv is None else list(argv))


def parse(argv: Sequence[str]) -> tuple[Command, dict[str, Any]]:
    """The command ``argv`` names and its arguments, as :func:`run` would call it (usage errors exit 2)."""
    return cli.parse(argv, load=load_commands)


def run(argv: Sequence[str]) -> None:
    """Parse ``argv`` (without the program name), run the command, exit with its status."""
    if list(argv[:1]) == ["--version"]:
        echo(f"envbuild, version {__version__}")
        sys.exit(0)
    try:
        cli.run(argv, load=load_commands)
    except BrokenPipeError:  # `envbuild check ... | head`
        sys.exit(1)
    sys.exit(0)
