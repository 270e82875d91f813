"""Resolve a lock's declared requirements into every distribution of the environment.

Input: the lock render wrote (its ``declared`` lines, index URLs and constraint copies, and its target:
Python, OS/glibc, architecture).  Output: :class:`Resolved` with every distribution pinned to the
target's file(s) and their sha256, or error findings naming what cannot work and why:

- ``E-REQ-CONFLICT``: no set of versions satisfies the requirements; every declared requirement
  involved is named with where it came from;
- ``E-SOURCE-ONLY`` / ``E-SOURCE-NEEDS-TORCH``: only a source distribution exists for the target (the
  image installs wheels only), and when its build imports torch, what to use instead;
- ``E-REQ-HASH``: a hash-locked input line's hashes do not include the target file's sha256.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from packaging.utils import canonicalize_name
from packaging.version import Version

from envbuild import __version__
from envbuild.errors import EXIT_ENGINE, EnvbuildError
from envbuild.lock.honest import direct_lines, newest_findings, profile_bound, uv_reason
from envbuild.lock.pylock_read import distributions_from
from envbuild.lock.releases import served
from envbuild.lock.source_build import source_builds
from envbuild.lock.source_only import describe_lines, source_only_finding
from envbuild.lock.target import Target
from envbuild.lock.toolkit import lock_toolkit
from envbuild.lock.torch_default import declared_torch_conflict
from envbuild.lock.urls import is_local, lock_urls, remote_links
from envbuild.lock.uv import (
    ResolverFailed,
    Sources,
    base_command,
    parse_annotated,
    run_uv,
    uv_binary,
    uv_version,
)
from envbuild.models import (
    Finding,
    Lock,
    LockedDistribution,
    LockResolution,
    RequirementLine,
)
from envbuild.plan.packages import PYPI
from envbuild.render.requirements import option_words
from envbuild.untrusted import one_line

_NAME_IN_TEXT = re.compile(
    r"(?<![\w./-])([A-Za-z0-9][A-Za-z0-9._-]*)"
    r"(?=(?:\[[^\]]*\])?(?:==|>=|<=|!=|~=|<|>| has | was |$|\s|,|\.))"
)
_NO_WHEELS = re.compile(
    r"([A-Za-z0-9][A-Za-z0-9._-]*)(?:==(\S+?))? has no (?:usable wheels|wheels with a matching [^,.]*)"
)
_WHEELS_REQUIRED = re.compile(r"Wheels are required for `([^`]+)`")
_NETWORK = (
    "Failed to fetch",
    "error sending request",
    "Could not connect",
    "dns error",
    "tcp connect error",
    "Request failed after",
    "Failed to download",
    "failed to read from file",
)


class ResolveError(EnvbuildError):
    """The resolver could not run to a decision (an index unreachable, uv missing or failing)."""

    exit_code = EXIT_ENGINE  # the network or the environment, not the input
    code = "E-RESOLVE"


@dataclass(frozen=True)
class Resolved:
    distributions: tuple[LockedDistribution, ...]
    findings: tuple[Finding, ...]
    resolution: LockResolution

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)


IndexesFrom = Literal["bundle", "command line"]


def sources_for(
    lock: Lock, index_urls: Iterable[str] = (), find_links: Iterable[str] = ()
) -> tuple[Sources, IndexesFrom]:
    """The indexes and find-links of the lock (or the command line's), and where the indexes came from."""
    index_urls = tuple(index_urls)
    found_links = list(find_links)
    declared_indexes: list[str] = []
    prerelease = False
    for line in lock.declared:
        if line.kind != "option":
            continue
        words = option_words(line)
        if len(words) >= 2 and words[0] in ("-i", "--index-url", "--extra-index-url"):
            declared_indexes.append(words[1])
        elif len(words) >= 2 and words[0] in ("-f", "--find-links"):
            found_links.append(words[1])
        elif words[:1] == ["--pre"]:
            prerelease = True
    origin: IndexesFrom
    if index_urls:
        urls, origin = index_urls, "command line"
    else:
        primary = [i.url for i in lock.index_urls if i.primary]
        extra = [i.url for i in lock.index_urls if not i.primary]
        urls = tuple(dict.fromkeys([*primary, *extra, *declared_indexes]))
        if not urls:
            urls = (PYPI,)
        origin = "bundle"
    return Sources(tuple(urls), tuple(dict.fromkeys(found_links)), prerelease), origin


def input_text(lock: Lock) -> str:
    """The resolver's input: one requirement per line, without hashes (checked separately)."""
    lines = [
        "# envbuild lock: the bundle's declared requirements (torch-family pins first, then the profile's)"
    ]
    for line in lock.declared:
        if line.kind == "requirement":
            lines.append(line.text)
    return "\n".join(lines) + "\n"


def _origins(lock: Lock) -> dict[str, list[RequirementLine]]:
    by_name: dict[str, list[RequirementLine]] = {}
    for line in lock.declared:
        if line.kind == "requirement" and line.name:
            by_name.setdefault(str(canonicalize_name(line.name)), []).append(line)
    return by_name


def hash_findings(lock: Lock, dists: Iterable[LockedDistribution]) -> list[Finding]:
    """A hash-locked input line must allow the file the lock chose for the target."""
    by_name = {d.name: d for d in dists}
    findings: list[Finding] = []
    for line in lock.declared:
        if line.kind != "requirement" or not line.hashes or not line.name:
            continue
        dist = by_name.get(str(canonicalize_name(line.name)))
        wanted = {h.split(":", 1)[1] for h in line.hashes if h.startswith("sha256:")}
        if dist is None or not wanted:
            continue
        got = {f.sha256 for f in dist.files}
        if not got & wanted:
            files = ", ".join(f"{f.filename} (sha256:{f.sha256})" for f in dist.files)
            findings.append(
                Finding(
                    severity="error",
                    code="E-REQ-HASH",
                    message=(
                        f"{line.origin}: {line.text} allows only {len(wanted)} sha256 hash(es), none of "
                        f"which is the target's file {files}; the hashes were generated for another "
                        "platform, Python or release: regenerate the file for the image's target, or drop "
                        "its hashes"
                    ),
                )
            )
    return findings


def _involved(text: str, lock: Lock) -> str:
    origins = _origins(lock)
    named = []
    for match in _NAME_IN_TEXT.finditer(text):
        key = str(canonicalize_name(match.group(1)))
        if key in origins and key not in named:
            named.append(key)
    return "; ".join(f"{key} ({describe_lines(origins[key])})" for key in named)


def _needs_source(name: str, lock: Lock, target: Target, sources: Sources) -> bool:
    """The release the resolution needs (the newest the profile's lines admit) has no wheel the target
    installs: uv's "has no usable wheels" may be said of older releases while the newest has one (an abi3
    or older manylinux wheel counts) and the real blocker is elsewhere."""
    releases = served(name, sources, target)
    bound = profile_bound(direct_lines(lock).get(name, []))
    wanted = [v for v in releases.releases if bound.contains(v, prereleases=True)]
    return not wanted or wanted[-1] not in releases.installable


def conflict_findings(text: str, lock: Lock, target: Target, sources: Sources) -> list[Finding]:
    """E-SOURCE-ONLY / E-SOURCE-NEEDS-TORCH only where the release the resolution needs has no wheel for
    the target (:func:`_needs_source`); otherwise E-REQ-CONFLICT with uv's explanation on one line."""
    cause = text.removeprefix("error: ").strip()
    names = {m.group(1) for m in _NO_WHEELS.finditer(cause)} | set(_WHEELS_REQUIRED.findall(cause))
    origins = _origins(lock)
    findings = [
        source_only_finding(name, origins.get(name, []), target, sources, lock)
        for name in sorted({str(canonicalize_name(n)) for n in names})
        if name in lock.build_from_source or _needs_source(name, lock, target, sources)
    ]
    if not findings:
        torch = declared_torch_conflict(cause, lock, target)
        if torch is not None:
            return [torch]
        involved = _involved(cause, lock)
        findings.append(
            Finding(
                severity="error",
                code="E-REQ-CONFLICT",
                message=(
                    "the requirements cannot be installed together for "
                    f"{target.describe()}: {uv_reason(cause)}"
                    + (f" Involved: {involved}." if involved else "")
                ),
            )
        )
    return findings


def resolve(
    lock: Lock,
    *,
    bundle: Path | None = None,
    index_urls: Iterable[str] = (),
    find_links: Iterable[str] = (),
    toolkit: str | None = None,
) -> Resolved:
    """Resolve ``lock``'s declared requirements for its target (:func:`_resolve_once`).  A package the
    profile names that is locked more than one series behind its newest (E-OLD-RELEASE) is asked for again
    at most one series behind (``NAME>=FLOOR``): uv takes the first version set it finds, which may hold
    an old release although a newer one installs (vllm 0.2.2 beside torch 2.14.1)."""
    index_urls, find_links = tuple(index_urls), tuple(find_links)
    floors: dict[str, Version] = {}
    first = _resolve_once(lock, bundle, index_urls, find_links, toolkit, floors)
    if not floors:
        return first
    lines = tuple(
        RequirementLine(kind="requirement", text=f"{name}>={floor}", name=name, origin=FLOOR_ORIGIN)
        for name, floor in sorted(floors.items())
    )
    raised = replace(lock, declared=(*lock.declared, *lines))
    again = _resolve_once(raised, bundle, index_urls, find_links, toolkit)
    if again.ok:
        return again
    why = "; ".join(f.message for f in again.findings if f.severity == "error")
    asked = ", ".join(line.text for line in lines)
    findings = tuple(
        replace(f, message=f"{f.message}. Asked at most one series behind ({asked}): {why}")
        if f.code == "E-OLD-RELEASE"
        else f
        for f in first.findings
    )
    return replace(first, findings=findings)


FLOOR_ORIGIN = "envbuild: at most one series behind the newest release (E-OLD-RELEASE)"


def _resolve_once(
    lock: Lock,
    bundle: Path | None,
    index_urls: Iterable[str],
    find_links: Iterable[str],
    toolkit: str | None,
    floors: dict[str, Version] | None = None,
) -> Resolved:
    """One resolution of ``lock``'s declared requirements for its target (``floors``: see
    :func:`envbuild.lock.honest.newest_findings`).  Writes nothing outside a temp folder.

    ``toolkit`` (the plan's ``builder_toolkit``, CUDA 13): also lock CUDA's compiler wheels for the builder
    stage (:mod:`envbuild.lock.toolkit`), at the resolved set's cuda-toolkit release, else at this one."""
    if not lock.declared and lock.packages:
        raise ResolveError(
            "the lock has no declared requirement lines (rendered by an envbuild before `envbuild lock` "
            "existed); render the bundle again, then lock it"
        )
    target = Target.of(lock)
    sources, indexes_from = sources_for(lock, index_urls, find_links)
    binary = uv_binary()
    resolution = LockResolution(
        resolver=uv_version(binary),
        envbuild_version=__version__,
        python_version=target.python_version,
        implementation=target.implementation,
        platform=target.resolver_platform,
        wheel_tags=target.platform_tags,
        index_urls=lock_urls(sources.index_urls),  # credentials as ${VAR}, never values
        find_links=remote_links(sources.find_links),  # a local folder: by its files only
        find_links_folders=sum(is_local(link) for link in sources.find_links),
        indexes_from=indexes_from,
    )
    constraints = [bundle / c for c in lock.constraint_files] if bundle is not None else []
    missing = [str(p) for p in constraints if not p.is_file()]
    if missing:
        raise ResolveError(
            f"constraint file(s) named by the lock are missing: {', '.join(missing)}; re-render"
        )
    with tempfile.TemporaryDirectory(prefix="envbuild-lock-") as tmp:
        work = Path(tmp)
        (work / "requirements.in").write_text(input_text(lock), encoding="utf-8")
        command = base_command(binary, target, sources, constraints, lock.build_from_source)
        try:
            raw = run_uv(command, work / "requirements.in", work)
        except ResolverFailed as failed:
            if any(marker in failed.text for marker in _NETWORK):
                indexes = ", ".join(resolution.index_urls) or "none"
                tls = (
                    "The index's TLS certificate is not trusted: point PIP_CERT or SSL_CERT_FILE at the CA "
                    "bundle that signs it (the system store is used too). "
                    if "certificate" in failed.text
                    else ""
                )
                raise ResolveError(
                    f"the resolver could not read an index ({indexes}): {one_line(failed.text)} {tls}Pass "
                    "--index-url for a reachable mirror, or --find-links for a folder of wheels (repeatable)"
                ) from None
            if "No solution found" not in failed.text and "has no usable wheels" not in failed.text:
                raise ResolveError(f"the resolver failed: {one_line(failed.text)}") from None
            return Resolved((), tuple(conflict_findings(failed.text, lock, target, sources)), resolution)
        annotations = parse_annotated(raw.annotated)
        origins = _origins(lock)
        dists, source_only = distributions_from(
            raw.pylock, annotations, origins, target, lock.build_from_source
        )
        findings = [source_only_finding(n, origins.get(n, []), target, sources, lock) for n in source_only]
        mismatch = sorted({d.name for d in dists} ^ (set(annotations) - set(source_only)))
        if mismatch:
            raise ResolveError(
                f"the resolver's two outputs disagree on: {', '.join(mismatch)}; run lock again"
            )
        findings += hash_findings(lock, dists)
        findings += newest_findings(
            lock,
            dists,
            input_text=input_text(lock),
            command=command,
            work=work,
            target=target,
            sources=sources,
            floors=floors,
        )
        if lock.build_from_source:
            try:
                built, more = source_builds(lock, raw.pylock, dists, command, work, target, sources)
            except ResolverFailed as failed:
                raise ResolveError(
                    f"the resolver failed on the build dependencies: {one_line(failed.text)}"
                ) from None
            dists, findings = [*dists, *built], [*findings, *more]
        if toolkit is not None:
            where = f"profile {lock.profile_name!r}"
            kit, more = lock_toolkit(where, dists, toolkit, command, work, target)
            dists, findings = [*dists, *kit], [*findings, *more]
    dists = sorted(dists, key=lambda d: (d.name, d.role))
    return Resolved(tuple(dists), tuple(findings), resolution)


__all__ = ["ResolveError", "Resolved", "resolve", "source_only_finding", "sources_for"]
