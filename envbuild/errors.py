"""All envbuild errors, under one root.

The CLI catches :class:`EnvbuildError` once and maps it to an exit code; no traceback reaches a user
for an expected failure.  Messages name the file and key involved and, where there is a closed set,
the valid choices.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from envbuild.untrusted import terminal

# Exit codes, documented in the README ("Output and exit codes").
EXIT_OK = 0
EXIT_FINDINGS = 1  # error findings (check, render, lock), a failed validation or build, a report that differs
EXIT_USAGE = 2  # invalid usage or input (a bad option, profile, bundle or lock)
EXIT_ENGINE = 3  # the engine, the network or the environment failed (no Docker, an index unreachable)


class EnvbuildError(Exception):
    """Root of every error envbuild raises on purpose."""

    exit_code: int = EXIT_USAGE
    code: str = "E-USAGE"  # the finding code of this error in a command's --json output

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def choices(values: Iterable[str]) -> str:
    """Format a closed set of valid values for an error message."""
    return ", ".join(sorted(values))


# A run of whitespace (and a list bullet after it), matched whole so the scan stays linear on hostile
# input (a megabyte of spaces); only a run holding a line break is joined.  And any control character.
_WHITE_RUN = re.compile(r"\s+([-*] +)?")
_BREAK = re.compile(r"[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line_message(text: str) -> str:
    """``text`` as one line, as every finding and profile issue is (issue 37).

    Each run of whitespace that holds a line break becomes ``"; "``, or one space after ``:``, ``;`` or
    ``,``, and also after ``.`` or before a lowercase letter (a wrapped line) where no ``-``/``*`` bullet
    follows it (the bullet is dropped: a list reads ``a; b``); nothing at either end.  A tab becomes a
    space, any other control character a visible escape (:func:`envbuild.untrusted.terminal`).  A
    resolver's report ``No solution found:\\n  Because a depends on b`` reads ``No solution found:
    Because a depends on b``."""
    if _CONTROL.search(text) is None:
        return text

    def join(match: re.Match[str]) -> str:
        if _BREAK.search(match.group(0)) is None:
            return match.group(0)
        if match.start() == 0 or match.end() == len(match.string):
            return ""
        before, after = match.string[match.start() - 1], match.string[match.end()]
        if before in ":;," or (not match.group(1) and (before == "." or after.islower())):
            return " "
        return "; "

    return terminal(_WHITE_RUN.sub(join, text).replace("\t", " "))


@dataclass(frozen=True)
class Issue:
    """One problem in an input file: where it is and what is wrong (its message one line)."""

    file: str
    key: str  # dotted key path, e.g. "python.packages[2]" or "checks[0].run"
    message: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "message", one_line_message(self.message))

    def __str__(self) -> str:
        where = f"{self.file}: {self.key}" if self.key else self.file
        return f"{where}: {self.message}"


@dataclass(frozen=True)
class Pending:
    """A value of a profile that failed to load whose check needs the catalog, which the loader does not
    read (an ``accelerator.targets`` entry, ``torch.version``): checked where the error is reported
    (:func:`envbuild.profile.places.catalog_issues`), so that its problem comes out with the others."""

    file: str
    key: str  # "accelerator.targets[0]", "torch.version"
    value: str


class ProfileError(EnvbuildError):
    """A profile (or a file it refers to) is invalid.  Carries every issue found, not just the first."""

    exit_code = EXIT_USAGE
    code = "E-PROFILE"

    def __init__(self, issues: Sequence[Issue], *, pending: Sequence[Pending] = ()) -> None:
        self.issues = tuple(issues)
        self.pending = tuple(pending)
        lines = [f"invalid profile ({len(self.issues)} problem{'s' if len(self.issues) != 1 else ''}):"]
        lines += [f"  - {issue}" for issue in self.issues]
        super().__init__("\n".join(lines))


class UsageError(EnvbuildError):
    """Bad command-line usage or a bad argument value (unknown target, missing file, ...)."""

    exit_code = EXIT_USAGE
    code = "E-USAGE"


class CatalogError(EnvbuildError):
    """A catalog data file shipped with envbuild is malformed (a bug in envbuild, not in the input)."""

    exit_code = EXIT_USAGE
    code = "E-CATALOG"


class IncompatibleError(EnvbuildError):
    """The plan has error findings and the caller did not force it."""

    exit_code = EXIT_FINDINGS
    code = "E-INCOMPATIBLE"


class BundleError(EnvbuildError):
    """A bundle directory is missing, incomplete or inconsistent."""

    exit_code = EXIT_USAGE
    code = "E-BUNDLE"


class BuildError(EnvbuildError):
    """An image build failed."""

    exit_code = EXIT_FINDINGS
    code = "E-BUILD"


class EngineUnavailable(EnvbuildError):
    """The Docker engine cannot be reached."""

    exit_code = EXIT_ENGINE
    code = "E-ENGINE"


class LockError(EnvbuildError):
    """A lock file is missing, unreadable or of an unknown format."""

    exit_code = EXIT_USAGE
    code = "E-LOCK"


class CaptureError(EnvbuildError):
    """A capture (``check --smi FILE``) is empty, truncated, hostile, or not a supported tool's output."""

    exit_code = EXIT_USAGE
    code = "E-CAPTURE"


class ReportError(EnvbuildError):
    """A report directory is missing, tampered with, or unreadable."""

    exit_code = EXIT_FINDINGS
    code = "E-REPORT"
