"""The command line (click): parse arguments, call the stages, print, map errors to exit codes.

Each group of commands lives in its own module and registers itself on :data:`cli`
(:mod:`envbuild.cli.app`, which holds the group, the shared options and error handling, and imports a
command's module only when that command is named); what they print follows :mod:`envbuild.cli.output`.
Nothing here imports torch or docker: they are imported by the commands that use them, when they run.
"""

from __future__ import annotations

from envbuild.cli.app import F, cli, handle_errors, json_option, main, parse, run, verbose_option

__all__ = ["F", "cli", "handle_errors", "json_option", "main", "parse", "run", "verbose_option"]
