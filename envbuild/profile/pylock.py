"""PEP 751 ``pylock.toml`` as a requirements input: each locked package becomes a pinned, hashed line.

A ``python.requirements`` entry named ``pylock.toml`` or ``pylock.<name>.toml`` is read as a lock file,
not as a pip requirements file.  Each ``[[packages]]`` entry becomes ``name==version`` (with its
``marker``) carrying the sha256 of every wheel and sdist it lists, so ``envbuild lock`` keeps the pins
and checks the file it chooses for the image against those hashes (``E-REQ-HASH``).  The install format
stays requirements.txt: a pylock's file URLs are tied to one location, its pins and hashes are not.

Refused, with the reason: a lock version other than 1.x, a package without a version (a directory, VCS
or archive source: not reproducible from an index), a file without a sha256/384/512 hash.
"""

from __future__ import annotations

import re
from typing import Any

from envbuild.compat import tomllib
from envbuild.models import RequirementLine
from envbuild.profile.pep508 import LineError, parse_requirement

_NAME = re.compile(r"^pylock(\.[^./]+)?\.toml$")
_ALGOS = {"sha256": 64, "sha384": 96, "sha512": 128}


def is_pylock(label: str) -> bool:
    return bool(_NAME.match(label.rsplit("/", 1)[-1]))


def _hashes(entry: Any, where: str) -> list[str]:
    table = entry.get("hashes") if isinstance(entry, dict) else None
    if not isinstance(table, dict) or not table:
        raise LineError(f"{where}: a file without hashes (pylock requires at least one)")
    found = []
    for algo, digest in sorted(table.items()):
        if (
            algo in _ALGOS
            and isinstance(digest, str)
            and re.fullmatch(rf"[0-9a-fA-F]{{{_ALGOS[algo]}}}", digest)
        ):
            found.append(f"{algo}:{digest.lower()}")
    if not found:
        raise LineError(f"{where}: no sha256/sha384/sha512 hash among {', '.join(sorted(table))}")
    return found


def parse_pylock(text: str, label: str) -> list[tuple[str, RequirementLine | LineError]]:
    """``(key, line or error)`` for every package of the lock file ``text`` (``label`` for origins)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return [("", LineError(f"not a TOML file: {exc}"))]
    version = str(data.get("lock-version", ""))
    if not version.startswith("1."):
        return [
            (
                "lock-version",
                LineError(f"lock-version {version!r} is not supported (PEP 751 lock-version 1.x)"),
            )
        ]
    packages = data.get("packages", [])
    if not isinstance(packages, list):
        return [("packages", LineError("packages must be an array of tables"))]
    out: list[tuple[str, RequirementLine | LineError]] = []
    for i, package in enumerate(packages):
        key = f"packages[{i}]"
        try:
            if not isinstance(package, dict) or not isinstance(package.get("name"), str):
                raise LineError("a package needs a name")
            name = package["name"]
            if not isinstance(package.get("version"), str):
                source = next((k for k in ("vcs", "directory", "archive") if k in package), "no version")
                raise LineError(
                    f"{name}: a {source} source without a version is not reproducible from an index; "
                    "lock a published release"
                )
            spec = f"{name}=={package['version']}"
            marker = package.get("marker")
            if isinstance(marker, str) and marker.strip():
                spec += f" ; {marker}"
            text_out, canonical = parse_requirement(spec)
            hashes: list[str] = []
            files = [*(package.get("wheels") or [])]
            if package.get("sdist"):
                files.append(package["sdist"])
            if not files:
                raise LineError(f"{name}: lists no wheels and no sdist")
            for j, entry in enumerate(files):
                for digest in _hashes(entry, f"{name} file {j}"):
                    if digest not in hashes:
                        hashes.append(digest)
            origin = f"{label}:{key}"
            out.append(
                (
                    key,
                    RequirementLine(
                        kind="requirement", text=text_out, name=canonical, hashes=tuple(hashes), origin=origin
                    ),
                )
            )
        except LineError as exc:
            out.append((key, exc))
    return out
