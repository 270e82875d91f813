"""The user's requirement lines (direct URLs and the PyTorch index, hash mode, declared pins) and the
package indexes of the plan.

The torch-family pins and their companions are :mod:`envbuild.plan.pins` and
:mod:`envbuild.plan.pins`."""

from __future__ import annotations

import re

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from envbuild.findings import Findings
from envbuild.models import IndexUrl, RequirementLine
from envbuild.plan.context import Context
from envbuild.versions import (
    applies_on_image,
    is_sdist_or_vcs,
    line_requirement,
    wheel_problem,
    wheel_project,
)

PYPI = "https://pypi.org/simple"


_VARIANT = re.compile(r"^(cu\d+|rocm\d+(\.\d+)*|cpu|xpu)$")
_TORCH_INDEX = re.compile(r"https?://download\.pytorch\.org/whl/(?:(?:test|nightly)/)?([a-z0-9.]+)/?")


def _check_torch_index(ctx: Context, out: Findings, line: RequirementLine) -> None:
    """A user option naming another variant's PyTorch index (``.../whl/cu118``) than the plan's."""
    if ctx.patch is None or ctx.variant is None:
        return
    for match in _TORCH_INDEX.finditer(line.text):
        variant = match.group(1)
        if variant == ctx.variant or not _VARIANT.match(variant):
            continue
        out.warning(
            "W-TORCH-INDEX",
            f"{line.origin}: {line.text!r} adds the PyTorch {variant} index, but the plan installs "
            f"{ctx.torch_label} from the {ctx.variant} index; other packages published there (xformers, "
            f"nvidia-*, ...) could come in built for {variant}: drop the line, envbuild adds the right index",
        )


def check_requirement_urls(ctx: Context, out: Findings) -> tuple[bool, bool]:
    """Direct URLs: wheels must fit the image; sdists/VCS need building.  Returns (builds, vcs)."""
    builds = vcs = False
    for line in ctx.profile.python.lines:
        if line.kind == "option" and line.text.startswith("--no-binary") and ":none:" not in line.text:
            builds = True
        if line.kind == "option" and line.text.startswith(("--index-url", "-i ")):
            out.warning(
                "W-USER-INDEX-URL",
                f"{line.origin}: {line.text!r} would replace pip's primary index; the torch variant index "
                "must stay primary, so the rendered requirements carry it as --extra-index-url",
            )
        if line.kind == "option":
            _check_torch_index(ctx, out, line)
        req = line_requirement(line)
        if req is None:
            continue
        if not req.url or not applies_on_image(req, ctx.python):
            continue
        vcs = vcs or req.url.startswith("git+")
        if is_sdist_or_vcs(req.url):
            builds = True
            continue
        if req.url.lower().split("?")[0].split("#")[0].endswith(".whl"):
            problem = wheel_problem(req.url.split("#")[0], ctx.python, ctx.os.glibc)
            if problem:
                out.error("E-WHEEL-TAGS", f"{line.origin}: {problem}")
            project = wheel_project(req.url.split("#")[0])
            if project is not None and project != canonicalize_name(req.name):
                out.error(
                    "E-WHEEL-NAME",
                    f"{line.origin}: the requirement names {req.name!r} but the wheel file is project "
                    f"{project!r}; pip refuses a direct URL whose metadata name differs. Write "
                    f"'{project} @ <url>'",
                )
    return builds, vcs


def _applies(ctx: Context, line: RequirementLine) -> bool:
    """False for a requirement whose marker excludes the image (pip skips it, hashes or not)."""
    req = line_requirement(line)
    return req is None or applies_on_image(req, ctx.python)


def check_hash_mode(ctx: Context, out: Findings) -> None:
    """One ``--hash`` puts pip in hash-checking mode: every line then needs hashes, which the lock adds.

    A hash-locked input (pip-compile / uv output) is welcome: ``envbuild lock`` keeps its pins, checks
    its hashes against the target's files (E-REQ-HASH) and hashes every other distribution, the
    torch-family pins included.  Until the bundle is locked, pip would refuse the unhashed lines.
    """
    reqs = [line for line in ctx.requirements if line.kind == "requirement" and _applies(ctx, line)]
    hashed = [line for line in reqs if line.hashes]
    hashed += [line for line in ctx.requirements if line.kind == "option" and "--require-hashes" in line.text]
    if not hashed:
        return
    missing = [line.origin for line in reqs if not line.hashes] + [p.spec for p in ctx.pins]
    shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
    out.info(
        "I-HASH-MODE",
        f"{hashed[0].origin} is hash-locked (--hash / --require-hashes), so the bundle installs in pip's "
        "hash-checking mode: `envbuild lock` keeps those pins, checks their hashes against the image's "
        "files, and hashes every other distribution"
        + (f" ({shown} carry none yet)" if missing else "")
        + "; `envbuild fetch` and `envbuild build` lock the bundle first",
    )


def check_declared_pins(ctx: Context, out: Findings) -> None:
    """An exact pin and another declared line for the same project that excludes it cannot both hold.

    Decided from the declared lines alone (no index), so ``check`` catches ``numpy<2`` next to
    ``numpy==2.2.6`` before ordering; ``check --resolve`` and ``envbuild lock`` catch the rest.
    """
    lines: dict[str, list[tuple[RequirementLine, Requirement]]] = {}
    for line in ctx.requirements:
        if line.kind != "requirement":
            continue
        req = line_requirement(line)
        if req is None or req.url or not applies_on_image(req, ctx.python):
            continue
        lines.setdefault(canonicalize_name(req.name), []).append((line, req))
    for name, found in lines.items():
        for line, req in found:
            specs = list(req.specifier)
            if len(specs) != 1 or specs[0].operator != "==" or "*" in specs[0].version:
                continue
            pinned = specs[0].version
            against = [
                (other, oreq)
                for other, oreq in found
                if other is not line and not oreq.specifier.contains(pinned, prereleases=True)
            ]
            if against:
                other, oreq = against[0]
                out.error(
                    "E-REQ-CONFLICT",
                    f"{name}: {line.origin} pins {str(req)!r} but {other.origin} asks for {str(oreq)!r}; "
                    "no release satisfies both: keep one of the two lines",
                )
                break  # one finding per project; the next project may conflict too


def note_unresolved(ctx: Context, out: Findings) -> None:
    """``check`` judges the declared lines only; say what it did not do."""
    if not ctx.pins and not any(line.kind == "requirement" for line in ctx.requirements):
        return
    out.info(
        "I-NOT-RESOLVED",
        "the dependencies of the declared requirements were not resolved: whether every distribution has "
        "a wheel for the image's Python and platform (and no two requirements conflict) is decided by "
        "`envbuild check --resolve` or `envbuild lock` on the rendered bundle",
    )


def index_urls(ctx: Context) -> tuple[IndexUrl, ...]:
    if ctx.patch is None or ctx.variant is None:
        return (IndexUrl(url=PYPI, reason="default package index (no torch in the profile)", primary=True),)
    if ctx.default_build:
        return (
            IndexUrl(
                url=PYPI,
                reason=(
                    f"{ctx.torch_label} is the package index's default build of torch {ctx.patch.version} "
                    "(no local tag); no PyTorch variant index is needed"
                ),
                primary=True,
            ),
        )
    url = ctx.catalog.index_url(ctx.variant)
    return (
        IndexUrl(
            url=url,
            reason=(
                f"{ctx.torch_label} and its companions are published with the +{ctx.variant} local tag only "
                f"on the PyTorch index ({ctx.catalog.torch.index_source})"
            ),
            primary=True,
        ),
        IndexUrl(url=PYPI, reason="the user's other requirements and torch's dependencies", primary=False),
    )
