"""What every command prints, one convention (README, "Output and exit codes").

- The command's result goes to stdout; progress and logs go to stderr (``envbuild: ...``).
- A finding is one line everywhere: ``SEVERITY: CODE: message`` (``-v`` adds its source below it).
- ``--json`` prints one object on stdout: :func:`envelope` (``format``, ``command``, ``ok``, ``findings``
  and the command's own keys), also when the command fails (``ok`` false, the error as a finding, with the
  file and key for an invalid profile).  docs/output.schema.json is its JSON Schema.
- Colour and tables come from rich, which writes plain text when ``NO_COLOR`` is set or the output is not
  a terminal.
- Text envbuild did not write (a report's, a capture's, a peer's, torch's) reaches the terminal through
  :mod:`envbuild.untrusted`: :func:`echo` for a line, :func:`markup` for text inside rich markup, and
  ``Text(terminal(...))`` or :func:`print_findings` for the rest; never as markup of its own.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import click

from envbuild.boundary import to_data
from envbuild.errors import EnvbuildError, ProfileError, one_line_message
from envbuild.untrusted import terminal

if TYPE_CHECKING:
    from rich.console import Console

    from envbuild.models import Finding

FORMAT = "envbuild.output/1"
SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def envelope(
    command: str, *, ok: bool, findings: Iterable[Finding | dict[str, Any]], **payload: Any
) -> dict[str, Any]:
    """The ``--json`` object of ``command`` (``"check"``, ``"report verify"``, ...)."""
    return {
        "format": FORMAT,
        "command": command,
        "ok": ok,
        "findings": [f if isinstance(f, dict) else to_data(f) for f in findings],
        **payload,
    }


def error_findings(exc: EnvbuildError) -> list[dict[str, Any]]:
    """``exc`` as findings: one per problem of an invalid profile (with its file and key), else one."""
    if isinstance(exc, ProfileError):
        return [
            {
                "severity": "error",
                "code": exc.code,
                "message": i.message,
                "source": None,
                "file": i.file,
                "key": i.key,
            }
            for i in exc.issues
        ]
    # one line, as every finding (a list an error holds reads "...: a; b")
    return [{"severity": "error", "code": exc.code, "message": one_line_message(exc.message), "source": None}]


def print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True))


def echo(text: object, *, err: bool = False) -> None:
    """One message (lines where it has several) on stdout or stderr, its control characters shown as
    escapes (:func:`envbuild.untrusted.terminal`)."""
    click.echo(terminal(text, multiline=True), err=err)


def markup(text: object, *, multiline: bool = False) -> str:
    """``text`` to put inside a rich markup string: control characters as escapes (``multiline``: not
    ``\n``), then ``rich.markup.escape`` (gloo's ``[enforce fail at /__w/...]`` would otherwise be read
    as a tag)."""
    from rich.markup import escape

    return escape(terminal(text, multiline=multiline))


def console(*, err: bool = False, soft_wrap: bool = False) -> Console:
    """A rich console on stdout (or stderr): plain text off a terminal, and under ``NO_COLOR`` (no bold
    either); ``FORCE_COLOR`` styles text that is not a terminal."""
    from rich.console import Console

    plain = bool(os.environ.get("NO_COLOR"))
    return Console(stderr=err, highlight=False, soft_wrap=soft_wrap, color_system=None if plain else "auto")


def finding_line(finding: Finding) -> str:
    """``warning: W-DRIVER-UNKNOWN: message``: the one line shape of a finding."""
    return f"{finding.severity}: {finding.code}: {terminal(finding.message)}"


def print_findings(findings: Sequence[Finding], *, verbose: bool = False, out: Console | None = None) -> None:
    """Each finding on one line (the terminal wraps it), its severity coloured; ``verbose``: its source."""
    from rich.text import Text

    out = out if out is not None else console()
    for finding in findings:  # a message may quote a capture (a card's name, a driver): shown, not run
        line = Text(f"{finding.severity}:", style=SEVERITY_STYLE[finding.severity])
        line.append(f" {finding.code}: {terminal(finding.message)}")
        out.print(line, soft_wrap=True)
        if verbose and finding.source:
            out.print(Text(f"  source: {terminal(finding.source)}", style="dim"), soft_wrap=True)
