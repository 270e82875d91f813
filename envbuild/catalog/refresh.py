"""``envbuild catalog refresh``: read the package indexes and write the user's catalog overlay.

What is read, concurrently (a small thread pool), within one total time limit:

1. PyPI's simple JSON API (``Accept: application/vnd.pypi.simple.v1+json``, PEP 691) for torch,
   torchvision, torchaudio, triton and bpy: releases, their Linux x86_64 wheels (names parsed with
   ``packaging.utils.parse_wheel_filename``), Python tags, yanked flags, requires-python.  Any of these
   pages failing is a failed refresh (:class:`RefreshError`, exit 1): nothing is written and the
   previous overlay stays.
2. PEP 658 metadata (``<file URL>.metadata``) of one Linux x86_64 wheel per torch, torchvision and
   torchaudio release from the built-in catalog's oldest series up.  Files that advertise it
   (``core-metadata`` / ``data-dist-info-metadata``) are tried first; a server that serves the files
   without advertising them (some mirrors) is tried on up to three wheels.  A release whose metadata is
   not served stays ``confirmed: false``.  From torch's Requires-Dist: the CUDA major and build of the
   default wheel (``nvidia-*-cuNN``, ``nvidia-cuda-runtime-cuNN==X.Y.*``, ``cuda-toolkit==X.Y.*``, or
   the unsuffixed ``nvidia-*``), and the ``triton`` requirement; from torchvision's and torchaudio's,
   their ``torch`` requirement (or none).
3. The PyTorch index: ``{torch-index}/torch/`` (PEP 503 HTML) for the variants of each release, then
   ``{torch-index}/{variant}/torch/`` for each variant found.  When it cannot be read, the refresh
   still succeeds; the overlay records why, and variant rows stay unknown.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, TypeVar

from packaging.version import Version

from envbuild import __version__
from envbuild.boundary import to_data
from envbuild.catalog import Catalog, load_catalog
from envbuild.catalog.index_pages import (
    HTML_ACCEPT,
    JSON_ACCEPT,
    FetchError,
    Project,
    companion_facts,
    fetch_metadata,
    get_page,
    parse_project,
    torch_facts,
    variants_of,
)
from envbuild.catalog.overlay import (
    BpyRow,
    CompanionRow,
    IndexRead,
    Overlay,
    OverlayInvalid,
    OverlayState,
    TorchRow,
    overlay_path,
    read,
    write,
)
from envbuild.catalog.overlay_merge import merge
from envbuild.errors import EXIT_ENGINE, EnvbuildError
from envbuild.resources import catalog_dir

PYPI = "https://pypi.org/simple"
PYTORCH = "https://download.pytorch.org/whl"
PROJECTS = ("torch", "torchvision", "torchaudio", "triton", "bpy")
WORKERS = 8
TOTAL_S = 300.0

T = TypeVar("T")


class RefreshError(EnvbuildError):
    """PyPI could not be read (or the refresh ran out of time): nothing was written."""

    exit_code = EXIT_ENGINE  # the network or the environment, not the input
    code = "E-REFRESH"


COMPANION_NAMES: tuple[Literal["torchvision", "torchaudio", "triton"], ...] = (
    "torchvision",
    "torchaudio",
    "triton",
)


# ---- the refresh ----------------------------------------------------------------------------------------


@dataclass
class Result:
    path: Path
    overlay: Overlay
    previous: Overlay | None
    previous_error: str | None
    state: OverlayState
    builtin: Catalog
    seconds: float

    def found(self) -> dict[str, list[str]]:
        o = self.overlay
        out = {"torch": [r.version for r in o.torch]}
        for name in ("torchvision", "torchaudio", "triton"):
            out[name] = [c.version for c in o.companions if c.name == name]
        out["bpy"] = [b.version for b in o.bpy]
        return out

    def _versions(self, overlay: Overlay) -> dict[str, set[str]]:
        return {
            k: set(v)
            for k, v in Result(self.path, overlay, None, None, self.state, self.builtin, 0).found().items()
        }

    def new_vs_builtin(self) -> dict[str, list[str]]:
        cat = self.builtin
        patches = [p for r in cat.releases for p in r.patch]
        known = {
            "torch": {p.version for p in patches},
            "torchvision": {p.torchvision for p in patches},
            "torchaudio": {p.torchaudio for p in patches if p.torchaudio},
            "triton": {p.triton for p in patches},
            "bpy": {v for s in cat.blender.series for v in s.releases},
        }
        return {k: [v for v in vs if v not in known[k]] for k, vs in self.found().items()}

    def new_vs_previous(self) -> dict[str, list[str]] | None:
        if self.previous is None:
            return None
        before = self._versions(self.previous)
        return {k: [v for v in vs if v not in before[k]] for k, vs in self.found().items()}

    def as_json(self) -> dict[str, Any]:
        o = self.overlay
        return {
            "overlay": str(self.path),
            "fetched_at": o.fetched_at.isoformat(),
            "seconds": round(self.seconds, 2),
            "indexes": to_data(o.indexes),
            "releases": self.found(),
            "new": {"built_in": self.new_vs_builtin(), "previous_overlay": self.new_vs_previous()},
            "previous_overlay_error": self.previous_error,
            "unconfirmed": {
                "torch": [r.version for r in o.torch if not r.confirmed],
                "companions": [f"{c.name} {c.version}" for c in o.companions if not c.confirmed],
            },
            "usable": {
                v: [*u.unconfirmed, *(n for _, n in u.variants)] for v, u in self.state.usable.items()
            },
            "unusable": list(self.state.unusable),
            "disagreements": list(self.state.disagreements),
        }


def _run(pool: cf.ThreadPoolExecutor, jobs: dict[T, Callable[[], Any]], deadline: float) -> dict[T, Any]:
    """Run ``jobs`` in ``pool``; each value is its result or the FetchError it raised."""
    futures = {pool.submit(fn): key for key, fn in jobs.items()}
    done, pending = cf.wait(futures, timeout=max(0.0, deadline - time.monotonic()))
    out: dict[T, Any] = {}
    for fut in done:
        try:
            out[futures[fut]] = fut.result()
        except FetchError as exc:
            out[futures[fut]] = exc
    for fut in pending:
        fut.cancel()
        out[futures[fut]] = FetchError("not read: the refresh ran out of time")
    return out


def _floor(builtin: Catalog) -> dict[str, Version]:
    patches = [p for r in builtin.releases for p in r.patch]
    return {
        "torch": min(Version(r.series) for r in builtin.releases),
        "torchvision": min(Version(p.torchvision) for p in patches),
        "torchaudio": min(Version(p.torchaudio) for p in patches if p.torchaudio),
        "triton": min(Version(p.triton) for p in patches),
        "bpy": min(Version(s.series) for s in builtin.blender.series),
    }


def refresh(
    index_url: str = PYPI, torch_index: str = PYTORCH, *, path: Path | None = None, total_s: float = TOTAL_S
) -> Result:
    """Read the indexes, write the overlay (atomically) and return what was found."""
    from envbuild.net import redact_url

    started = time.monotonic()
    deadline = started + total_s
    if path is None:
        try:
            path = overlay_path()
        except RuntimeError:  # Path.home() without a home folder
            raise RefreshError("no home folder to keep the catalog overlay in: set XDG_DATA_HOME") from None
    builtin = load_catalog(catalog_dir())
    floor = _floor(builtin)
    index_url, torch_index = index_url.rstrip("/"), torch_index.rstrip("/")
    previous: Overlay | None = None
    previous_error = None
    if path.exists():
        try:
            previous = read(path)
        except OverlayInvalid as exc:
            previous_error = f"{path}: {exc}"

    pages = {name: f"{index_url}/{name}/" for name in PROJECTS}
    root = f"{torch_index}/torch/"
    pool = cf.ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="envbuild-refresh")
    try:
        jobs: dict[str, Callable[[], Any]] = {
            name: functools.partial(get_page, url, JSON_ACCEPT, deadline) for name, url in pages.items()
        }
        jobs["pytorch"] = functools.partial(get_page, root, HTML_ACCEPT, deadline)
        got = _run(pool, jobs, deadline)
        failed = [str(got[n]) for n in PROJECTS if isinstance(got[n], FetchError)]
        if failed:
            raise RefreshError(
                f"cannot read the package index {redact_url(index_url)}: {failed[0]}"
                + (f" (and {len(failed) - 1} more pages)" if len(failed) > 1 else "")
                + f"; nothing was written ({path} is unchanged). Check the network or --index-url."
            )
        try:
            projects = {n: parse_project(n, pages[n], got[n]) for n in PROJECTS}
        except FetchError as exc:
            raise RefreshError(
                f"cannot use the package index {redact_url(index_url)}: {exc}; nothing was written"
            ) from None

        indexes = [IndexRead(kind="pypi", url=redact_url(index_url), ok=True)]
        variants: dict[str, set[str]] | None = None
        variant_source: dict[tuple[str, str], str] = {}
        root_body = got["pytorch"]
        if isinstance(root_body, FetchError):
            indexes.append(
                IndexRead(kind="pytorch", url=redact_url(torch_index), ok=False, error=str(root_body))
            )
        else:
            # Only the releases refresh records (the built-in catalog's oldest series up): the root
            # page also lists every old release's variants (cu92, cu101, ...), whose pages are not read.
            variants = {v: vs for v, vs in variants_of(root_body).items() if Version(v) >= floor["torch"]}
            indexes.append(IndexRead(kind="pytorch", url=redact_url(torch_index), ok=True))

        # Metadata per release, and the PyTorch index's per-variant pages, in one round.
        meta_jobs: dict[tuple[str, str], Callable[[], Any]] = {}
        for name in ("torch", "torchvision", "torchaudio"):
            for version, files in projects[name].releases.items():
                if Version(version) >= floor[name]:
                    meta_jobs[(name, version)] = functools.partial(fetch_metadata, files, deadline)
        for variant in sorted({v for vs in (variants or {}).values() for v in vs}):
            url = f"{torch_index}/{variant}/torch/"
            meta_jobs[("variant", variant)] = functools.partial(get_page, url, HTML_ACCEPT, deadline)
        results = _run(pool, meta_jobs, deadline)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)

    for (kind, variant), body in results.items():
        if kind != "variant":
            continue
        url = f"{torch_index}/{variant}/torch/"
        if isinstance(body, FetchError):
            indexes.append(IndexRead(kind="pytorch", url=redact_url(url), ok=False, error=str(body)))
            continue
        for version, seen in variants_of(body).items():
            if variant in seen:
                variant_source[(version, variant)] = redact_url(url)

    def meta(name: str, version: str) -> tuple[bytes, str] | None:
        value = results.get((name, version))
        return value if isinstance(value, tuple) else None

    def common(project: Project, version: str) -> dict[str, Any]:
        files = project.releases[version]
        return {
            "version": version,
            "source": redact_url(project.url),
            "yanked": all(f.yanked for f in files),
            "python": tuple(sorted({t for f in files for t in f.tags})),
            "requires_python": next((f.requires_python for f in files if f.requires_python), None),
        }

    def ordered(project: Project, floor_v: Version) -> list[str]:
        return sorted((v for v in project.releases if Version(v) >= floor_v), key=Version)

    torch_rows = []
    for version in ordered(projects["torch"], floor["torch"]):
        got_meta = meta("torch", version)
        major, default, triton = torch_facts(got_meta[0]) if got_meta else (None, None, None)
        found = sorted(variants.get(version, set())) if variants is not None else None
        sources = sorted(
            {variant_source[(version, v)] for v in found or () if (version, v) in variant_source}
        )
        glibcs = [f.glibc for f in projects["torch"].releases[version] if f.glibc]
        torch_rows.append(
            TorchRow(
                **common(projects["torch"], version),
                confirmed=got_meta is not None,
                glibc=max(glibcs, key=Version) if glibcs else None,
                metadata_source=redact_url(got_meta[1]) if got_meta else None,
                cuda_major=major,
                default_variant=default,
                triton_requirement=triton,
                variants=tuple(found) if found is not None else None,
                variants_source="; ".join(sources)
                if sources
                else (redact_url(root) if found is not None else None),
            )
        )
    companions = []
    names: tuple[Literal["torchvision", "torchaudio", "triton"], ...] = (
        "torchvision",
        "torchaudio",
        "triton",
    )
    for name in names:
        for version in ordered(projects[name], floor[name]):
            got_meta = meta(name, version) if name != "triton" else None
            companions.append(
                CompanionRow(
                    **common(projects[name], version),
                    name=name,
                    confirmed=got_meta is not None or name == "triton",
                    metadata_source=redact_url(got_meta[1]) if got_meta else None,
                    torch_requirement=companion_facts(got_meta[0]) if got_meta else None,
                )
            )
    bpy = [
        BpyRow(**common(projects["bpy"], v), confirmed=True) for v in ordered(projects["bpy"], floor["bpy"])
    ]
    overlay = Overlay(
        format=1,
        fetched_at=datetime.now(timezone.utc),
        envbuild_version=__version__,
        indexes=tuple(indexes),
        torch=tuple(torch_rows),
        companions=tuple(companions),
        bpy=tuple(bpy),
    )
    try:
        write(path, overlay)
    except OSError as exc:
        raise RefreshError(
            f"{path}: cannot write the catalog overlay: {exc.strerror or exc}; the previous overlay is kept"
        ) from None
    _, state = merge(builtin.torch, builtin.toolkits, overlay, path, with_compare=True)
    return Result(path, overlay, previous, previous_error, state, builtin, time.monotonic() - started)
