"""Torch-family pins (with the local variant tag), companions, the user's requirement lines, indexes."""

from __future__ import annotations

import re

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from envbuild.errors import choices
from envbuild.models import IndexUrl, Pin, RequirementLine
from envbuild.plan.context import Context
from envbuild.plan.findings import Findings
from envbuild.plan.versions import (
    applies_on_image,
    is_sdist_or_vcs,
    parse_requirement,
    wheel_problem,
    wheel_project,
    wheel_version,
)

PYPI = "https://pypi.org/simple"
COMPANIONS = ("torchvision", "torchaudio", "triton", "pytorch-triton-rocm")
FAMILY = frozenset({"torch", *COMPANIONS})


def _release_versions(ctx: Context) -> dict[str, tuple[str, str | None]]:
    """name -> (version, local tag) of what this torch release pairs with on this variant."""
    assert ctx.patch is not None
    local = ctx.variant
    out: dict[str, tuple[str, str | None]] = {"torch": (ctx.patch.version, local)}
    out["torchvision"] = (ctx.patch.torchvision, local)
    if ctx.patch.torchaudio:
        out["torchaudio"] = (ctx.patch.torchaudio, local)
    if ctx.backend == "rocm":
        out["pytorch-triton-rocm"] = (ctx.patch.triton, None)
    else:
        out["triton"] = (ctx.patch.triton, None)
    return out


def _matches(req: Requirement, version: str, local: str | None) -> bool:
    full = Version(f"{version}+{local}" if local else version)
    return req.specifier.contains(full, prereleases=True)


def resolve_pins(ctx: Context, out: Findings) -> None:
    if ctx.patch is None or ctx.variant is None:
        for line in ctx.profile.python.lines:
            if ctx.patch is None and line.kind == "requirement" and line.name:
                _user_line(ctx, out, line, {}, {})
            ctx.requirements.append(line)
        return
    pairs = _release_versions(ctx)
    src = f"catalog: {ctx.patch.source} [{ctx.patch.tier}]"
    wanted: dict[str, str] = {"torch": f"{ctx.torch_label} (torch.version)"}
    if ctx.backend == "cuda":
        wanted["triton"] = f"required by the {ctx.variant} torch wheel on Linux"
    elif ctx.backend == "rocm":
        wanted["pytorch-triton-rocm"] = "required by the ROCm torch wheel (not PyPI triton)"
    for i, text in enumerate(ctx.profile.torch.packages):
        where = f"torch.packages[{i}]"
        try:
            req = Requirement(text)
        except InvalidRequirement as exc:
            out.error("E-COMPANION-INVALID", f"{where}: {text!r} is not a requirement ({exc})")
            continue
        name = canonicalize_name(req.name)
        _companion(ctx, out, where, req, name, pairs, wanted)
    for line in ctx.profile.python.lines:
        family = line.kind == "requirement" and line.name and canonicalize_name(line.name) in FAMILY
        if family and not _user_line(ctx, out, line, pairs, wanted):
            continue
        ctx.requirements.append(line)
    order = ["torch", *COMPANIONS]
    for pin_name in sorted(wanted, key=order.index):
        version, local = pairs[pin_name]
        ctx.pins.append(Pin(name=pin_name, version=version, local=local, reason=f"{wanted[pin_name]}; {src}"))
    if ctx.patch.tier == "unconfirmed" and "torchvision" in wanted:
        out.info(
            "I-PIN-UNCONFIRMED",
            f"torchvision {ctx.patch.torchvision} for torch {ctx.patch.version} follows the pairing rule "
            "but was not seen in a stored source",
        )


def _not_paired(ctx: Context, name: str) -> str:
    """Why ``name`` has no pin for this torch release and backend, and what to do instead."""
    assert ctx.patch is not None
    if name == "torchaudio":
        return (
            f"torchaudio has no release for torch {ctx.patch.version} (upstream stopped at 2.11.0 and "
            "its wheels require torch 2.11); drop it or use torch <= 2.11"
        )
    if name == "triton" and ctx.backend == "rocm":
        return (
            f"{ctx.torch_label} requires pytorch-triton-rocm (pulled in by the ROCm index); PyPI triton "
            "next to ROCm torch is wrong: drop it"
        )
    if name == "pytorch-triton-rocm":
        return f"pytorch-triton-rocm goes with ROCm torch wheels only; {ctx.torch_label} uses triton: drop it"
    return f"it does not go with {ctx.torch_label}"


def _companion(
    ctx: Context,
    out: Findings,
    where: str,
    req: Requirement,
    name: str,
    pairs: dict[str, tuple[str, str | None]],
    wanted: dict[str, str],
) -> None:
    assert ctx.patch is not None
    if name == "torch":
        version, local = pairs["torch"]
        if req.url or not _matches(req, version, local):
            out.error(
                "E-COMPANION-MISMATCH",
                f"{where}: {str(req)!r} contradicts torch.version ({ctx.torch_label}); drop it, torch "
                "is pinned from torch.version",
            )
        return
    if name not in COMPANIONS:
        out.error(
            "E-COMPANION-UNKNOWN",
            f"{where}: {req.name!r} is not a torch companion; valid: {choices(COMPANIONS)} "
            "(other packages belong in python.packages)",
        )
        return
    if name == "torchaudio" and "torchaudio" not in pairs:
        out.error("E-COMPANION-UNAVAILABLE", f"{where}: {_not_paired(ctx, name)}")
        return
    if name not in pairs:
        out.error("E-COMPANION-MISMATCH", f"{where}: {_not_paired(ctx, name)}")
        return
    version, local = pairs[name]
    if req.url or not _matches(req, version, local):
        out.error(
            "E-COMPANION-MISMATCH",
            f"{where}: {str(req)!r} does not match {ctx.torch_label}, which pairs with "
            f"{name}=={version}{'+' + local if local else ''}; write the bare name {name!r} to get that pin",
        )
        return
    wanted.setdefault(name, f"companion of {ctx.torch_label} ({where})")


def _user_line(
    ctx: Context,
    out: Findings,
    line: RequirementLine,
    pairs: dict[str, tuple[str, str | None]],
    wanted: dict[str, str],
) -> bool:
    """Check a user requirement naming a torch-family package; False when a pin supersedes it."""
    req = parse_requirement(line)
    if req is None or not applies_on_image(req, ctx.python):
        return True
    name = canonicalize_name(req.name)
    if ctx.patch is None:
        if name == "torch":
            out.warning(
                "W-TORCH-UNDECLARED",
                f"{line.origin}: {line.text!r} installs whatever torch build PyPI serves (one CUDA "
                "variant, no "
                "local tag); declare [torch] version so envbuild pins the variant for the target",
            )
        return True
    if name not in pairs:
        out.error("E-REQ-CONFLICT", f"{line.origin}: {line.text!r}: {_not_paired(ctx, name)}")
        return True
    version, local = pairs[name]
    pin = f"{name}=={version}{'+' + local if local else ''}"
    if req.url:
        found = wheel_version(req.url.split("#")[0]) if ".whl" in req.url.lower() else None
        if found is not None and found == Version(pin.split("==")[1]):
            wanted.setdefault(name, f"companion of {ctx.torch_label} ({line.origin})")
            out.info(
                "I-REQ-SUPERSEDED",
                f"{line.origin}: the direct wheel URL for {name} {found} is replaced by the exact pin {pin} "
                "from the PyTorch index (same build)",
            )
            return False
        what = f"is {name} {found}" if found is not None else "is not a wheel envbuild can read"
        out.error(
            "E-REQ-CONFLICT",
            f"{line.origin}: {line.text!r} {what}, but {ctx.torch_label} needs {pin}; remove the line "
            "(envbuild pins it) or change torch.version / accelerator.version",
        )
        return True
    if not _matches(req, version, local):
        out.error(
            "E-REQ-CONFLICT",
            f"{line.origin}: {line.text!r} conflicts with the pin {pin} for {ctx.torch_label}; remove it "
            "(envbuild pins it) or change torch.version / accelerator.version to match",
        )
        return True
    wanted.setdefault(name, f"companion of {ctx.torch_label} ({line.origin})")
    out.info("I-REQ-SUPERSEDED", f"{line.origin}: {line.text!r} is replaced by the exact pin for {name}")
    return False


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
        req = parse_requirement(line)
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
    req = parse_requirement(line)
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
        req = parse_requirement(line)
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
