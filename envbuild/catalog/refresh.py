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
import email.parser
import functools
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import unquote, urljoin, urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from envbuild import __version__
from envbuild.boundary import to_data
from envbuild.catalog import Catalog, load_catalog
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
from envbuild.net import page_links
from envbuild.resources import catalog_dir

PYPI = "https://pypi.org/simple"
PYTORCH = "https://download.pytorch.org/whl"
PROJECTS = ("torch", "torchvision", "torchaudio", "triton", "bpy")
JSON_ACCEPT = "application/vnd.pypi.simple.v1+json"
HTML_ACCEPT = "text/html"
WORKERS = 8
TOTAL_S = 300.0
REQUEST_S = 30.0
UNADVERTISED_TRIES = 3
_VARIANT = re.compile(r"^(cu\d{3}|rocm\d+\.\d+(\.\d+)?|cpu)$")
_GLIBC = {"manylinux1": "2.5", "manylinux2010": "2.12", "manylinux2014": "2.17"}

T = TypeVar("T")


class RefreshError(EnvbuildError):
    """PyPI could not be read (or the refresh ran out of time): nothing was written."""

    exit_code = EXIT_ENGINE  # the network or the environment, not the input
    code = "E-REFRESH"


class FetchError(Exception):
    pass


COMPANION_NAMES: tuple[Literal["torchvision", "torchaudio", "triton"], ...] = (
    "torchvision",
    "torchaudio",
    "triton",
)


def _get(url: str, accept: str, deadline: float) -> bytes:
    from envbuild.net import open_url, redact_url

    left = deadline - time.monotonic()
    if left <= 0:
        raise FetchError(f"{redact_url(url)}: not read, the refresh ran out of time")
    try:
        with open_url(url, accept=accept, timeout=min(REQUEST_S, left)) as response:
            return response.read()
    except OSError as exc:
        code = getattr(exc, "code", None)
        reason = f"HTTP {code}" if code else str(getattr(exc, "reason", None) or exc.strerror or exc)
        raise FetchError(f"{redact_url(url)}: {reason}") from None


# ---- PyPI project pages ------------------------------------------------------------------------------


@dataclass
class _File:
    filename: str
    url: str
    tags: tuple[str, ...]
    glibc: str | None
    yanked: bool
    requires_python: str | None
    advertised: bool


@dataclass
class _Project:
    name: str
    url: str
    releases: dict[str, list[_File]] = field(default_factory=dict)  # version -> its Linux x86_64 wheels


def _tag_text(interpreter: str, abi: str) -> str:
    if abi == "abi3":
        return f"{interpreter}-abi3"
    if abi.startswith("cp") and abi.endswith("t"):
        return abi
    return interpreter


def _linux_x86_64(filename: str) -> tuple[Version, tuple[str, ...], str | None] | None:
    """(version, Python tags, glibc) of a Linux x86_64 wheel's name; None for anything else."""
    try:
        _, version, _, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return None
    linux = [t for t in tags if "linux" in t.platform and t.platform.endswith("x86_64")]
    if not linux:
        return None
    glibc = None
    for t in linux:
        m = re.match(r"^manylinux_(\d+)_(\d+)_", t.platform)
        found = f"{m.group(1)}.{m.group(2)}" if m else _GLIBC.get(t.platform.split("_x86_64")[0])
        if found and (glibc is None or Version(found) > Version(glibc)):
            glibc = found
    return version, tuple(sorted({_tag_text(t.interpreter, t.abi) for t in linux})), glibc


def parse_project(name: str, url: str, body: bytes) -> _Project:
    import json

    try:
        data = json.loads(body)
        files = data["files"]
        if not isinstance(files, list):
            raise TypeError("files is not a list")
    except (ValueError, KeyError, TypeError) as exc:
        raise FetchError(f"{url}: not a PEP 691 JSON project page ({exc})") from None
    project = _Project(name=name, url=url)
    for entry in files:
        if not isinstance(entry, dict) or not str(entry.get("filename", "")).endswith(".whl"):
            continue
        parsed = _linux_x86_64(entry["filename"])
        if parsed is None:
            continue
        version, tags, glibc = parsed
        if version.local or version.is_devrelease:
            continue
        advertised = bool(entry.get("core-metadata") or entry.get("data-dist-info-metadata"))
        rp = entry.get("requires-python")
        project.releases.setdefault(str(version), []).append(
            _File(
                filename=entry["filename"],
                url=urljoin(url, str(entry.get("url", entry["filename"]))),
                tags=tags,
                glibc=glibc,
                yanked=bool(entry.get("yanked")),
                requires_python=str(rp) if rp else None,
                advertised=advertised,
            )
        )
    return project


# ---- metadata ------------------------------------------------------------------------------------------


def _requires(body: bytes) -> list[Requirement]:
    msg = email.parser.BytesParser().parsebytes(body, headersonly=True)
    out = []
    for line in msg.get_all("Requires-Dist") or []:
        try:
            req = Requirement(str(line))
        except InvalidRequirement:
            continue
        if req.marker is not None and "extra" in str(req.marker):
            continue
        out.append(req)
    return out


def _pinned(req: Requirement) -> Version | None:
    """The version an ``==`` (or ``>=`` lower bound, failing that) specifier names."""
    specs = list(req.specifier)
    for op in ("==", ">="):
        for spec in specs:
            if spec.operator == op and "*" not in spec.version:
                try:
                    return Version(spec.version)
                except ValueError:
                    continue
    return None


def torch_facts(body: bytes) -> tuple[int | None, str | None, str | None]:
    """(CUDA major, default build ``cuNNN``, triton requirement) from a torch wheel's METADATA."""
    major: int | None = None
    variant: str | None = None
    triton: str | None = None
    unsuffixed: int | None = None
    for req in _requires(body):
        name = canonicalize_name(req.name)
        if name == "triton":
            triton = str(req.specifier)
            continue
        suffixed = re.fullmatch(r"nvidia-[a-z0-9-]+-cu(\d+)", name)
        if suffixed:
            major = major or int(suffixed.group(1))
        pin = _pinned(req)
        if name == "cuda-toolkit" or re.fullmatch(r"nvidia-cuda-runtime(-cu\d+)?", name):
            if pin is not None and req.specifier and any(s.operator == "==" for s in req.specifier):
                variant = f"cu{pin.major}{pin.minor}"
                major = pin.major
        elif name.startswith("nvidia-") and not suffixed and pin is not None:
            unsuffixed = unsuffixed or pin.major
    return major or unsuffixed, variant, triton


def companion_facts(body: bytes) -> str | None:
    """A companion's ``torch`` requirement specifier ("" for a bare ``torch``), None when it has none."""
    for req in _requires(body):
        if canonicalize_name(req.name) == "torch":
            return str(req.specifier)
    return None


def _candidates(files: list[_File]) -> list[_File]:
    live = [f for f in files if not f.yanked] or files
    ranked = sorted(live, key=lambda f: (not f.advertised, "cp312" not in f.tags, f.filename))
    if any(f.advertised for f in ranked):
        return [f for f in ranked if f.advertised][:2]
    return ranked[:UNADVERTISED_TRIES]


def _metadata(files: list[_File], deadline: float) -> tuple[bytes, str] | None:
    for f in _candidates(files):
        try:
            return _get(f.url + ".metadata", "*/*", deadline), f.url + ".metadata"
        except FetchError:
            continue
    return None


# ---- the PyTorch index ---------------------------------------------------------------------------------


def variants_of(body: bytes) -> dict[str, set[str]]:
    """version -> variants (``cu128``, ``rocm6.4``, ``cpu``) of the Linux x86_64 wheels a PEP 503
    page lists."""
    out: dict[str, set[str]] = {}
    for href in page_links(body.decode("utf-8", "replace")):
        filename = unquote(urlsplit(href).path.rsplit("/", 1)[-1])
        parsed = _linux_x86_64(filename)
        if parsed is None:
            continue
        version = parsed[0]
        variant = str(version.local or "")
        if _VARIANT.match(variant):
            out.setdefault(version.public, set()).add(variant)
    return out


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
            name: functools.partial(_get, url, JSON_ACCEPT, deadline) for name, url in pages.items()
        }
        jobs["pytorch"] = functools.partial(_get, root, HTML_ACCEPT, deadline)
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
                    meta_jobs[(name, version)] = functools.partial(_metadata, files, deadline)
        for variant in sorted({v for vs in (variants or {}).values() for v in vs}):
            url = f"{torch_index}/{variant}/torch/"
            meta_jobs[("variant", variant)] = functools.partial(_get, url, HTML_ACCEPT, deadline)
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

    def common(project: _Project, version: str) -> dict[str, Any]:
        files = project.releases[version]
        return {
            "version": version,
            "source": redact_url(project.url),
            "yanked": all(f.yanked for f in files),
            "python": tuple(sorted({t for f in files for t in f.tags})),
            "requires_python": next((f.requires_python for f in files if f.requires_python), None),
        }

    def ordered(project: _Project, floor_v: Version) -> list[str]:
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
        fetched_at=datetime.now(UTC),
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
