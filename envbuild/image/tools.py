"""The validator's own environment in ``BUNDLE/tools/``: locked and hashed like everything else.

``envbuild fetch`` builds envbuild's own wheel here (:mod:`envbuild.image.selfwheel`), resolves its
``Requires-Dist`` with uv for the image's target (:func:`envbuild.lock.resolve.resolve`, the resolver
``envbuild lock`` runs), against the indexes the bundle was locked with (or ``fetch --index-url`` /
``--find-links``), writes ``tools/requirements.txt`` (every distribution, envbuild's own wheel
included, pinned with the sha256 of its file) and downloads exactly those files, each checked.  The
Dockerfile installs them into ``/opt/envbuild`` with
``pip install --no-deps --require-hashes --no-index --find-links tools -r tools/requirements.txt``.
The bundle's lock is not changed: the validator's venv is not the environment the lock describes.
"""

from __future__ import annotations

import email.parser
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from envbuild import __version__, atomic
from envbuild.digest import sha256_file
from envbuild.errors import BuildError
from envbuild.models import Lock, LockedDistribution, RequirementLine

REQUIREMENTS = "requirements.txt"
ORIGIN = "envbuild's Requires-Dist"
INSTALL = "pip install --no-deps --require-hashes --no-index --find-links tools -r tools/requirements.txt"


@dataclass(frozen=True)
class ToolsLock:
    self_wheel: str  # envbuild-<version>-py3-none-any.whl
    self_sha256: str
    distributions: tuple[LockedDistribution, ...]  # envbuild's dependencies for the image's target
    resolver: str
    platform: str


def requires_dist(wheel: Path) -> tuple[str, ...]:
    """The ``Requires-Dist`` lines of ``wheel``'s METADATA."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        message = email.parser.Parser().parsestr(archive.read(name).decode("utf-8"))
    return tuple(message.get_all("Requires-Dist") or ())


def tools_lock_input(lock: Lock, requires: tuple[str, ...]) -> Lock:
    """The bundle's lock with envbuild's requirements in place of the profile's (same target)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    declared = tuple(
        RequirementLine(
            kind="requirement", text=text, name=str(canonicalize_name(Requirement(text).name)), origin=ORIGIN
        )
        for text in requires
    )
    return replace(
        lock, declared=declared, constraint_files=(), build_from_source=(), resolved=False, distributions=()
    )


def lock_tools(
    lock: Lock,
    self_wheel: Path,
    *,
    index_urls: tuple[str, ...] = (),
    find_links: tuple[str, ...] = (),
) -> ToolsLock:
    """Resolve envbuild's own dependencies for ``lock``'s target; raise :class:`BuildError` on an error
    finding.  Indexes: ``index_urls`` when given, else those the bundle was locked with (their
    ``${VAR}`` credentials filled from the environment), else the bundle's."""
    from envbuild.lock.resolve import resolve
    from envbuild.lock.urls import expand

    if not index_urls and lock.resolution is not None:
        index_urls = tuple(expand(url) for url in lock.resolution.index_urls)
    wanted = tools_lock_input(lock, requires_dist(self_wheel))
    resolved = resolve(wanted, index_urls=index_urls, find_links=find_links)
    errors = [f for f in resolved.findings if f.severity == "error"]
    if errors:
        lines = "\n".join(f"  - {f.code}: {f.message}" for f in errors)
        raise BuildError(
            f"fetch: envbuild's own dependencies (tools/) do not resolve for the image:\n{lines}"
        )
    return ToolsLock(
        self_wheel=self_wheel.name,
        self_sha256=sha256_file(self_wheel),
        distributions=resolved.distributions,
        resolver=resolved.resolution.resolver,
        platform=resolved.resolution.platform,
    )


def _lines(tools: ToolsLock, lock: Lock) -> Iterator[str]:
    yield f"# tools/requirements.txt, locked by envbuild {__version__} with {tools.resolver}"
    yield f"#   for CPython {lock.python_version}, {tools.platform}: the validator's venv (/opt/envbuild)."
    yield "# envbuild's own wheel (built by `envbuild fetch` from the installed envbuild) and its"
    yield "# dependencies, each pinned to the sha256 of its file in this folder. Install with"
    yield f"#   {INSTALL}"
    yield ""
    yield "--require-hashes"
    yield "--only-binary :all:"
    yield ""
    yield f"envbuild=={__version__} \\"
    yield f"    --hash=sha256:{tools.self_sha256}"
    for dist in tools.distributions:
        yield ""
        yield f"{dist.spec} \\"
        for j, value in enumerate(dist.hashes):
            yield f"    --hash={value}" + (" \\" if j < len(dist.hashes) - 1 else "")
        via = [*dist.required_by] or ["envbuild"]
        yield f"    # via {', '.join(via)}"


def tools_requirements(tools: ToolsLock, lock: Lock) -> str:
    return "\n".join(_lines(tools, lock)) + "\n"


def fetch_tools(
    lock: Lock,
    tools_dir: Path,
    *,
    index_urls: tuple[str, ...] = (),
    find_links: tuple[str, ...] = (),
    say: Callable[[str], None] = lambda _: None,
) -> ToolsLock:
    """envbuild's wheel, its locked dependencies and ``tools/requirements.txt`` into ``tools_dir``.

    Wheels in ``tools_dir`` that the new lock does not name are removed (``tools/`` is envbuild's)."""
    from envbuild.image.selfwheel import build_self_wheel
    from envbuild.image.wheelhouse import download_locked

    tools_dir.mkdir(parents=True, exist_ok=True)
    self_wheel = build_self_wheel(tools_dir)
    say(f"locking envbuild's own dependencies (the validator's venv) for CPython {lock.python_version}")
    tools = lock_tools(lock, self_wheel, index_urls=index_urls, find_links=find_links)
    download_locked(
        lock, tools_dir, say, find_links=find_links, index_urls=index_urls, distributions=tools.distributions
    )
    wanted = {self_wheel.name} | {f.filename for d in tools.distributions for f in d.files}
    for stale in tools_dir.glob("*.whl"):
        if stale.name not in wanted:
            stale.unlink()
    atomic.write_text(tools_dir / REQUIREMENTS, tools_requirements(tools, lock))
    return tools
