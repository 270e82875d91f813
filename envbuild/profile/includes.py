"""Bounds on ``-r``/``-c`` includes, and the parse of each distinct file, reused.

Includes are a tree that a file can make exponential: 16 files, each including the next four times,
are 4**15 inclusions.  Under one requirements file, at most :data:`MAX_INCLUSIONS` inclusions and
:data:`MAX_INCLUDED_LINES` physical lines are read in all, an inclusion counted each time it happens
(a file included again is charged its own inclusions and lines again, without being parsed again).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from envbuild.models import RequirementLine

MAX_INCLUSIONS = 256  # -r/-c inclusions under one requirements file, each time one happens
MAX_INCLUDED_LINES = 100_000  # physical lines read under one requirements file, each inclusion counted


class OverBudget(Exception):
    """An include bound is reached: the whole file is refused with this one message."""


@dataclass(frozen=True)
class Parsed:
    """A file parsed once (with its includes), reused each time it is included again."""

    lines: tuple[RequirementLine, ...]
    inclusions: int  # -r/-c inclusions inside it, each time one happens
    physical: int  # physical lines read, its own and its inclusions'
    files: frozenset[str]  # the labels it reads: a cycle through them is still refused
    depth: int  # how deep its includes nest


@dataclass
class Budget:
    """What one requirements file and its includes have used so far (:data:`MAX_INCLUSIONS`,
    :data:`MAX_INCLUDED_LINES`), and each distinct file's parse: (resolved path, as constraints) ->."""

    inclusions: int = 0
    physical: int = 0
    parsed: dict[tuple[Path, bool], Parsed] = field(default_factory=dict)

    def charge(self, inclusions: int, physical: int, where: str) -> None:
        self.inclusions += inclusions
        self.physical += physical
        if self.inclusions > MAX_INCLUSIONS:
            raise OverBudget(
                f"more than {MAX_INCLUSIONS} -r/-c inclusions in all (each time a file is included counts; "
                f"the limit was passed at {where}): include each file once"
            )
        if self.physical > MAX_INCLUDED_LINES:
            raise OverBudget(
                f"more than {MAX_INCLUDED_LINES} lines in all across the -r/-c includes (each inclusion "
                f"counts its file's lines; the limit was passed at {where}): include each file once"
            )


@dataclass
class Frame:
    files: set[str]  # the labels read so far: this file's and its includes'
    depth: int = 0  # how deep its includes nest so far
