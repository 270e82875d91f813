"""Reading the package indexes for ``envbuild catalog refresh`` (:mod:`envbuild.catalog.refresh`): one page
or metadata file per request, within the refresh's deadline, and the facts each yields: a PEP 691
project page's Linux x86_64 wheels, a release's PEP 658 metadata (torch's CUDA build and triton
requirement, a companion's torch requirement), the PyTorch index's variants.  Pages are parsed by
:mod:`envbuild.simpleindex`, the reader ``envbuild lock`` uses too."""

from __future__ import annotations

import email.parser
import re
import time
from dataclasses import dataclass, field

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from envbuild.simpleindex import PageError, read_html, read_json

JSON_ACCEPT = "application/vnd.pypi.simple.v1+json"
HTML_ACCEPT = "text/html"
REQUEST_S = 30.0
UNADVERTISED_TRIES = 3
_VARIANT = re.compile(r"^(cu\d{3}|rocm\d+\.\d+(\.\d+)?|cpu)$")
_GLIBC = {"manylinux1": "2.5", "manylinux2010": "2.12", "manylinux2014": "2.17"}


class FetchError(Exception):
    pass


def get_page(url: str, accept: str, deadline: float) -> bytes:
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
class Project:
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


def parse_project(name: str, url: str, body: bytes) -> Project:
    try:
        files = read_json(body, url)
    except PageError as exc:
        raise FetchError(f"{url}: {exc}") from None
    project = Project(name=name, url=url)
    for entry in files:
        if not entry.filename.endswith(".whl"):
            continue
        parsed = _linux_x86_64(entry.filename)
        if parsed is None:
            continue
        version, tags, glibc = parsed
        if version.local or version.is_devrelease:
            continue
        project.releases.setdefault(str(version), []).append(
            _File(
                filename=entry.filename,
                url=entry.url,
                tags=tags,
                glibc=glibc,
                yanked=entry.yanked,
                requires_python=entry.requires_python,
                advertised=entry.has_metadata,
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


def fetch_metadata(files: list[_File], deadline: float) -> tuple[bytes, str] | None:
    for f in _candidates(files):
        try:
            return get_page(f.url + ".metadata", "*/*", deadline), f.url + ".metadata"
        except FetchError:
            continue
    return None


# ---- the PyTorch index ---------------------------------------------------------------------------------


def variants_of(body: bytes) -> dict[str, set[str]]:
    """version -> variants (``cu128``, ``rocm6.4``, ``cpu``) of the Linux x86_64 wheels a PEP 503
    page lists."""
    out: dict[str, set[str]] = {}
    for entry in read_html(body, ""):
        parsed = _linux_x86_64(entry.filename)
        if parsed is None:
            continue
        version = parsed[0]
        variant = str(version.local or "")
        if _VARIANT.match(variant):
            out.setdefault(version.public, set()).add(variant)
    return out
