"""Commands declared with decorators and parsed with the standard library's argparse.

A command is a function.  ``@group.command(NAME)`` registers it; ``@option`` and ``@argument`` declare
its parameters, the top decorator first (as they read).  The function is called with one keyword
argument per parameter: an option's name is its long flag (``--base-image`` -> ``base_image``) unless a
bare word names it (``option("--target", "targets", multiple=True)``).

Only the command being run is built into a parser, after :data:`envbuild.cli.COMMAND_MODULES` has
imported its module alone: a cold ``envbuild check`` loads neither the other commands nor a CLI
framework (argparse is part of Python; click cost a cold start ~15 ms of imports).

Usage errors go to stderr as ``envbuild CMD: error: ...`` after the command's usage line, exit 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

F = TypeVar("F", bound=Callable[..., Any])
PROG = "envbuild"


def echo(message: str = "", *, err: bool = False, nl: bool = True) -> None:
    """``message`` and a newline (unless ``nl=False``) to stdout (or stderr), flushed: what follows may
    come from a child process."""
    stream = sys.stderr if err else sys.stdout
    stream.write(f"{message}\n" if nl else message)
    stream.flush()


class Param:
    """One declared parameter: an option (``--name``, ``-n``, ``--x/--no-x``) or a positional argument."""

    def __init__(
        self,
        decls: tuple[str, ...],
        *,
        positional: bool,
        is_flag: bool = False,
        multiple: bool = False,
        required: bool = False,
        default: Any = None,
        type: Callable[[str], Any] | None = None,
        metavar: str | None = None,
        help: str | None = None,
        show_default: bool = False,
    ) -> None:
        self.positional = positional
        self.flags = [d for d in decls if d.startswith("-")]
        names = [d for d in decls if not d.startswith("-")]
        self.negative: str | None = None
        if len(self.flags) == 1 and "/" in self.flags[0]:  # "--tools/--no-tools"
            self.flags[0], self.negative = self.flags[0].split("/", 1)
        if positional:
            self.dest = names[0]
        else:
            longest = max(self.flags, key=len)
            self.dest = names[0] if names else longest.lstrip("-").replace("-", "_")
        self.is_flag = is_flag
        self.multiple = multiple
        self.required = required
        self.default = default
        self.type = type
        self.metavar = metavar
        self.help = help
        self.show_default = show_default

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        text = self.help or ""
        if self.show_default and self.default is not None and not self.multiple:
            shown = self.default if not isinstance(self.default, bool) else str(self.default).lower()
            text = f"{text} (default: {shown})".strip()
        kwargs: dict[str, Any] = {"help": text or None}
        if self.positional:
            kwargs["metavar"] = self.metavar or self.dest.upper()
            if self.type is not None:
                kwargs["type"] = self.type
            parser.add_argument(self.dest, **kwargs)
            return
        kwargs["dest"] = self.dest
        if self.negative is not None:
            flags = [*self.flags]
            parser.add_argument(*flags, action="store_true", default=self.default, **kwargs)
            parser.add_argument(self.negative, dest=self.dest, action="store_false", help=argparse.SUPPRESS)
            return
        if self.is_flag:
            parser.add_argument(*self.flags, action="store_true", default=bool(self.default), **kwargs)
            return
        kwargs["metavar"] = self.metavar or max(self.flags, key=len).lstrip("-").upper()
        if self.type is not None:
            kwargs["type"] = self.type
        if self.multiple:
            parser.add_argument(*self.flags, action="append", default=None, **kwargs)
            return
        parser.add_argument(*self.flags, default=self.default, required=self.required, **kwargs)

    def value(self, raw: Any) -> Any:
        if self.multiple:
            return tuple(raw or ())
        return raw


def _params(func: Callable[..., Any]) -> list[Param]:
    params: list[Param] | None = getattr(func, "__envbuild_params__", None)
    if params is None:
        params = []
        func.__envbuild_params__ = params  # type: ignore[attr-defined]
    return params


def option(*decls: str, **kwargs: Any) -> Callable[[F], F]:
    """An option; ``is_flag``, ``multiple``, ``required``, ``default``, ``type``, ``metavar``, ``help``,
    ``show_default`` as in click.  ``--x/--no-x`` declares a boolean with its negation."""

    def decorate(func: F) -> F:
        _params(func).insert(0, Param(decls, positional=False, **kwargs))
        return func

    return decorate


def argument(name: str, **kwargs: Any) -> Callable[[F], F]:
    """A positional argument (required); ``type`` and ``metavar`` as for options."""

    def decorate(func: F) -> F:
        _params(func).insert(0, Param((name,), positional=True, **kwargs))
        return func

    return decorate


# ---- value types: each raises ArgumentTypeError with what is wrong ------------------------------------


def path_type(
    *, exists: bool = False, file_okay: bool = True, dir_okay: bool = True
) -> Callable[[str], Path]:
    """A path argument; with ``exists``, it must exist; a file where a folder is wanted (or the reverse)
    is refused when it exists."""

    def convert(text: str) -> Path:
        path = Path(text)
        try:
            is_dir, is_file, present = path.is_dir(), path.is_file(), path.exists()
        except (OSError, ValueError):
            raise argparse.ArgumentTypeError(f"{text!r} is not a usable path") from None
        what = "folder" if not file_okay else "file" if not dir_okay else "path"
        if exists and not present:
            raise argparse.ArgumentTypeError(f"{what} {text!r} does not exist")
        if is_dir and not dir_okay:
            raise argparse.ArgumentTypeError(f"{text!r} is a folder, not a file")
        if is_file and not file_okay:
            raise argparse.ArgumentTypeError(f"{text!r} is a file, not a folder")
        return path

    return convert


def int_range(low: int) -> Callable[[str], int]:
    """An integer of at least ``low``."""

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is below {low}")
        return value

    return convert


def integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def cleandoc(doc: str) -> str:
    """A docstring without the indentation of its second and later lines (as ``inspect.cleandoc``,
    which is not imported for it: ``inspect`` costs a cold start ~5 ms)."""
    first, *rest = doc.strip().splitlines() or [""]
    indents = [len(line) - len(line.lstrip()) for line in rest if line.strip()]
    cut = min(indents, default=0)
    return "\n".join([first.strip(), *(line[cut:].rstrip() for line in rest)])


# ---- commands and groups -------------------------------------------------------------------------------


class Command:
    def __init__(self, name: str, func: Callable[..., Any]) -> None:
        self.name = name
        self.func = func
        self.help = cleandoc(func.__doc__ or "")
        self.summary = self.help.split("\n\n")[0].replace("\n", " ")

    def parser(self, prog: str) -> argparse.ArgumentParser:
        parser = _Parser(
            prog=prog,
            description=self.help,
            formatter_class=_formatter,
            allow_abbrev=False,  # `--tar` is not `--target`: a later option must not change its meaning
        )
        for param in _params(self.func):
            param.add_to(parser)
        return parser

    def parse(self, prog: str, argv: Sequence[str]) -> dict[str, Any]:
        """The function's keyword arguments for ``argv``; a usage error exits 2."""
        values = vars(self.parser(prog).parse_args(list(argv)))
        return {p.dest: p.value(values[p.dest]) for p in _params(self.func)}


class Group:
    """Commands under one name (``envbuild image diff``); the root group is ``envbuild`` itself."""

    def __init__(self, name: str, help: str = "") -> None:
        self.name = name
        self.help = help
        self.summary = help.split("\n\n")[0].replace("\n", " ")
        self.commands: dict[str, Command | Group] = {}

    def command(self, name: str) -> Callable[[F], F]:
        def decorate(func: F) -> F:
            self.commands[name] = Command(name, func)
            return func

        return decorate

    def group(self, name: str) -> Callable[[Callable[..., Any]], Group]:
        def decorate(func: Callable[..., Any]) -> Group:
            group = Group(name, cleandoc(func.__doc__ or ""))
            self.commands[name] = group
            return group

        return decorate

    def usage(self, prog: str) -> str:
        lines = [f"usage: {prog} COMMAND [ARGS]...", ""]
        if self.help:
            lines += [self.help, ""]
        lines.append("commands:")
        width = max((len(name) for name in self.commands), default=0)
        for name in sorted(self.commands):
            lines.append(f"  {name:<{width}}  {self.commands[name].summary}")
        lines += ["", f"Run '{prog} COMMAND -h' for a command's options."]
        return "\n".join(lines)

    def resolve(
        self, prog: str, argv: Sequence[str], load: Callable[[str | None], None] | None = None
    ) -> tuple[Command, str, list[str]]:
        """The command ``argv`` names, its program name (``envbuild image diff``) and its arguments.

        ``load(name)`` imports the module that defines a command of this group (None: all of them).
        No command, ``-h`` or ``--help`` prints the commands and exits (0 when asked for, else 2)."""
        if not argv or argv[0] in ("-h", "--help"):
            if load is not None:
                load(None)
            echo(self.usage(prog), err=not argv)
            sys.exit(0 if argv else 2)
        name, rest = argv[0], list(argv[1:])
        if load is not None:
            load(name)
        found = self.commands.get(name)
        if found is None:
            from envbuild.errors import choices
            from envbuild.profile.fields import did_you_mean

            if load is not None:
                load(None)
            hint = did_you_mean(name, self.commands)
            usage_error(prog, f"no such command {name!r}{hint}; commands: {choices(sorted(self.commands))}")
        if isinstance(found, Group):
            return found.resolve(f"{prog} {name}", rest)
        return found, f"{prog} {name}", rest

    def parse(
        self, argv: Sequence[str], load: Callable[[str | None], None] | None = None
    ) -> tuple[Command, dict[str, Any]]:
        """The command ``argv`` names and its keyword arguments, without running it."""
        command, prog, rest = self.resolve(self.name, argv, load)
        return command, command.parse(prog, rest)

    def run(self, argv: Sequence[str], load: Callable[[str | None], None] | None = None) -> Any:
        command, kwargs = self.parse(argv, load)
        return command.func(**kwargs)


def _formatter(prog: str) -> argparse.HelpFormatter:
    """argparse's formatter, told the width: left to itself it imports ``shutil`` (and with it the
    compression modules) to ask, on every parser built, help or not."""
    from envbuild.cli._text import columns

    return argparse.RawDescriptionHelpFormatter(prog, width=columns(sys.stdout) - 2)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        usage_error(self.prog, message, self.format_usage())


def usage_error(prog: str, message: str, usage: str | None = None) -> NoReturn:
    """``usage: ...`` and ``PROG: error: MESSAGE`` on stderr; exit 2."""
    if usage:
        sys.stderr.write(usage)
    sys.stderr.write(f"{prog}: error: {message}\n")
    if not usage:
        sys.stderr.write(f"Run '{prog} -h' for help.\n")
    sys.exit(2)
