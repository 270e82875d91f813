"""What a source-only distribution needs to build: read from its sdist, not guessed from its name.

When the resolver finds no wheel for the target, the sdist of the release in question is looked up on
the same indexes (PEP 691 JSON or PEP 503 HTML simple pages, read by :mod:`envbuild.simpleindex`),
downloaded (up to :data:`MAX_SDIST_BYTES`) and read: ``[build-system] requires`` in ``pyproject.toml``
and the imports of ``setup.py``.  A build that needs torch (flash-attn, mamba-ssm and the like) cannot
succeed in pip's isolated build environment, so the finding says what to use instead.  Any failure to
look leaves the facts unknown; the finding is still an error, because the image installs wheels only.
"""

from __future__ import annotations

import io
import re
import tarfile
import zipfile
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidSdistFilename, canonicalize_name, parse_sdist_filename
from packaging.version import Version

from envbuild.compat import tomllib
from envbuild.lock.uv import Sources
from envbuild.models import RequirementLine
from envbuild.net import open_url
from envbuild.simpleindex import ACCEPT, read_page

MAX_SDIST_BYTES = 64 << 20
_TORCH_IMPORT = re.compile(r"^\s*(?:import\s+torch\b|from\s+torch(?:\.\w+)*\s+import\b)", re.M)


@dataclass(frozen=True)
class SourceFacts:
    version: str | None = None
    needs_torch: bool = False
    evidence: str = ""  # "setup.py imports torch", "pyproject.toml build-system requires torch"


def _sdist_urls(index: str, name: str) -> list[tuple[str, str]]:
    """(filename, absolute URL) of every sdist of ``name`` on ``index``."""
    return [(f, u) for f, u in project_files(index, name) if f.endswith((".tar.gz", ".zip"))]


def project_files(index: str, name: str) -> list[tuple[str, str]]:
    """(filename, absolute URL) of every file of ``name`` on ``index``; a page that is not a simple-index
    page raises :class:`envbuild.simpleindex.PageError` (a ValueError)."""
    page = index.rstrip("/") + f"/{name}/"
    with open_url(page, accept=ACCEPT, timeout=20) as response:
        body = response.read(8 << 20)
        headers = getattr(response, "headers", None)  # a file:// index has none
        kind = str(headers.get("Content-Type", "")) if headers is not None else ""
    return [(f.filename, f.url) for f in read_page(body, kind, page)]


def _pick(
    name: str, candidates: list[tuple[str, str]], declared: list[RequirementLine]
) -> tuple[str, str, str] | None:
    specs = []
    for line in declared:
        try:
            specs.append(Requirement(line.text).specifier)
        except InvalidRequirement:
            continue
    best: tuple[Version, str, str] | None = None
    for filename, url in candidates:
        try:
            project, version = parse_sdist_filename(filename)
        except InvalidSdistFilename:
            continue
        if canonicalize_name(project) != name or any(
            not s.contains(version, prereleases=True) for s in specs
        ):
            continue
        if best is None or version > best[0]:
            best = (version, filename, url)
    return (str(best[0]), best[1], best[2]) if best else None


def read_members(data: bytes, filename: str) -> dict[str, str]:
    """``setup.py`` and ``pyproject.toml`` at the sdist's top folder."""
    wanted = {"setup.py", "pyproject.toml"}
    found: dict[str, str] = {}
    if filename.endswith(".zip"):
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for info in archive.infolist():
                parts = info.filename.split("/")
                if len(parts) == 2 and parts[1] in wanted and info.file_size < (4 << 20):
                    found[parts[1]] = archive.read(info).decode("utf-8", "replace")
        return found
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
        for member in archive:
            parts = member.name.split("/")
            if len(parts) == 2 and parts[1] in wanted and member.isfile() and member.size < (4 << 20):
                handle = archive.extractfile(member)
                if handle is not None:
                    found[parts[1]] = handle.read().decode("utf-8", "replace")
    return found


def inspect_sdist(data: bytes, filename: str) -> tuple[bool, str]:
    """(its build needs torch, the evidence) from the sdist's bytes."""
    members = read_members(data, filename)
    if "pyproject.toml" in members:
        try:
            requires = tomllib.loads(members["pyproject.toml"]).get("build-system", {}).get("requires", [])
        except tomllib.TOMLDecodeError:
            requires = []
        for text in requires:
            try:
                if canonicalize_name(Requirement(str(text)).name) == "torch":
                    return True, f"pyproject.toml build-system requires {text!r}"
            except InvalidRequirement:
                continue
    if "setup.py" in members and _TORCH_IMPORT.search(members["setup.py"]):
        return True, "its setup.py imports torch"
    return False, "its build does not import torch" if members else ""


def source_build_facts(name: str, declared: list[RequirementLine], sources: Sources) -> SourceFacts:
    for index in sources.index_urls:
        try:
            picked = _pick(name, _sdist_urls(index, name), declared)
            if picked is None:
                continue
            version, filename, url = picked
            with open_url(url, timeout=60) as response:
                data = response.read(MAX_SDIST_BYTES + 1)
            if len(data) > MAX_SDIST_BYTES:
                return SourceFacts(version, False, f"sdist {filename} is too large to inspect")
            needs, evidence = inspect_sdist(data, filename)
            return SourceFacts(version, needs, f"sdist {filename}: {evidence}" if evidence else "")
        except (OSError, ValueError, tarfile.TarError, zipfile.BadZipFile):
            continue
    return SourceFacts()


def wheel_files(name: str, version: str, sources: Sources) -> list[str]:
    """The wheel file names of ``name`` ``version`` on the indexes (unreadable indexes skipped)."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    found: list[str] = []
    for index in sources.index_urls:
        try:
            files = project_files(index, name)
        except (OSError, ValueError):
            continue
        for filename, _url in files:
            try:
                project, got, _build, _tags = parse_wheel_filename(filename)
            except InvalidWheelFilename:
                continue
            if canonicalize_name(project) == name and got.public == version:
                found.append(filename)
    return found
