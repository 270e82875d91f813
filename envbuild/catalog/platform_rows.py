"""Rows of ``platform.toml``: the base operating systems, their Pythons, and their apt snapshot archives."""

from __future__ import annotations

import re
from dataclasses import dataclass

from envbuild.catalog.rows import SERIES, Row, not_empty, shape
from envbuild.models import OsId

_CODENAME = re.compile(r"^[a-z]+$")
_GLIBC = re.compile(r"^2\.\d+$")


@dataclass(frozen=True, kw_only=True)
class OsEntry(Row):
    id: OsId
    name: str
    image: str
    release_id: str
    release_version: str
    codename: str  # the suite name in apt sources ("bookworm", "noble")
    glibc: str
    system_python: str
    deadsnakes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        shape("codename", self.codename, _CODENAME, "suite name (lower-case letters)")
        shape("glibc", self.glibc, _GLIBC, "glibc version (2.N)")
        shape("system_python", self.system_python, SERIES, "Python version (3.X)")

    @property
    def pythons(self) -> tuple[str, ...]:
        return (self.system_python, *self.deadsnakes)


SNAPSHOT_RE = re.compile(r"^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$")
_SNAPSHOT_URL = re.compile(r"^https?://[^\s\"']+[^/]$")


@dataclass(frozen=True, kw_only=True)
class AptSnapshot(Row):
    """A distribution's snapshot archive: ``{url}/{pocket with the snapshot after its archive}``."""

    release_id: str
    url: str
    pockets: tuple[str, ...]  # "ARCHIVE SUITE COMPONENT..." with {codename}
    since: str  # the first snapshot the service has

    def __post_init__(self) -> None:
        super().__post_init__()
        shape("url", self.url, _SNAPSHOT_URL, "archive URL (http(s)://..., no trailing slash)")
        not_empty("pockets", self.pockets)
        shape("since", self.since, SNAPSHOT_RE, "snapshot instant (YYYYMMDDTHHMMSSZ)")

    def lines(self, codename: str, snapshot: str, mirror: str) -> tuple[str, ...]:
        """One-line apt sources for ``snapshot``, ``mirror`` standing for :attr:`url`."""
        out = []
        for pocket in self.pockets:
            archive, suite_components = pocket.format(codename=codename).split(" ", 1)
            out.append(f"deb [check-valid-until=no] {mirror}/{archive}/{snapshot} {suite_components}")
        return tuple(out)
