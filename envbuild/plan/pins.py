"""The torch-family pins (with the local variant tag): :func:`resolve_pins` pins torch and its companions and
judges every line of the profile that names one of them.  Which torchvision, torchaudio and triton release
pairs with the plan's torch release comes from the catalog's rows of their metadata (``Requires-Dist``).

Over 400 lines because: one concern, the torch family's pins; the pairing's helpers were shared privately.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envbuild.catalog.torch_rows import CompanionRelease, TorchRequires
from envbuild.errors import choices
from envbuild.findings import Findings
from envbuild.models import Pin, RequirementLine
from envbuild.plan.context import Context
from envbuild.versions import (
    applies_on_image,
    line_requirement,
    wheel_version,
)

COMPANIONS = ("torchvision", "torchaudio", "triton", "pytorch-triton-rocm")
FAMILY = frozenset({"torch", *COMPANIONS})


@dataclass(frozen=True)
class _Choice:
    """The release of a companion the plan pins for this torch, and the evidence for it."""

    version: str
    local: str | None  # the variant tag: the PyTorch index publishes the paired build with it
    evidence: str  # "torchvision 0.22.1 requires torch==2.7.1 (its Requires-Dist)"
    source: str
    declared: bool  # compatible by declaration only (no release pins this torch exactly)


def _local(ctx: Context) -> str | None:
    """The torch-family pins' local tag: the variant, unless the index serves it as its default build."""
    return None if ctx.default_build else ctx.variant


def _release_rows(ctx: Context, name: str) -> dict[str, CompanionRelease]:
    return {r.version: r for r in ctx.catalog.torch.companion if r.name == name}


def _torch_version(ctx: Context) -> Version:
    assert ctx.patch is not None
    return Version(ctx.patch.version)


def _allows(lines: tuple[str, ...], version: Version) -> bool:
    return all(Requirement(line).specifier.contains(version, prereleases=True) for line in lines)


def _pins_exactly(lines: tuple[str, ...], version: Version) -> bool:
    specs = [spec for line in lines for spec in Requirement(line).specifier]
    exact = any(s.operator in ("==", "===") and "*" not in s.version for s in specs)
    return exact and _allows(lines, version)


def _quote(row: CompanionRelease) -> str:
    """``torchvision 0.22.1 requires torch==2.7.1 (its Requires-Dist)``: the metadata line, as written."""
    if not row.requires_torch:
        return f"{row.name} {row.version} declares no torch requirement (no Requires-Dist on torch)"
    return f"{row.name} {row.version} requires {_lines(row.requires_torch)} (its Requires-Dist)"


def _lines(lines: tuple[str, ...]) -> str:
    """Requires-Dist lines as packaging writes them (``torch (==2.7.1)`` -> ``torch==2.7.1``)."""
    return "; ".join(str(Requirement(line)) for line in lines)


def _triton_lines(ctx: Context) -> tuple[TorchRequires | None, tuple[tuple[str, str], ...]]:
    """This torch release's own Requires-Dist on triton: the lines whose markers hold on the image, each
    as (the line as packaging writes it, the requirement without its marker)."""
    assert ctx.patch is not None
    row = next((t for t in ctx.catalog.torch.torch_requires if t.torch == ctx.patch.version), None)
    if row is None:
        return None, ()
    return row, row.triton_on_image(ctx.python)


def _shown(lines: tuple[tuple[str, str], ...]) -> str:
    return "; ".join(shown for shown, _ in lines)


def _choose(ctx: Context, name: str) -> _Choice | None:
    """The torchvision / torchaudio release for this torch, from the releases' own metadata.

    The newest release whose Requires-Dist pins this torch exactly; else the catalog's pairing when its
    metadata allows this torch; else (upstream stopped publishing) the newest release compatible by
    declaration (no torch requirement, or a range holding this torch).  Without metadata rows for the
    package, the catalog's pairing as recorded.
    """
    assert ctx.patch is not None
    paired = ctx.patch.torchvision if name == "torchvision" else ctx.patch.torchaudio
    rows = _release_rows(ctx, name)
    if not rows or (paired is not None and paired not in rows):
        if paired is None:
            return None
        src = f"catalog: {ctx.patch.source} [{ctx.patch.tier}]"
        return _Choice(paired, _local(ctx), f"the catalog pairs {name} {paired}", src, False)
    torch = _torch_version(ctx)
    fits = sorted(
        (r for r in rows.values() if _allows(r.requires_torch, torch)), key=lambda r: Version(r.version)
    )
    exact = [r for r in fits if _pins_exactly(r.requires_torch, torch)]
    if exact:
        return _Choice(exact[-1].version, _local(ctx), _quote(exact[-1]), _src(exact[-1]), False)
    found = next((r for r in fits if r.version == paired), fits[-1] if fits else None)
    if found is None:
        return None
    if found.version == paired:  # the catalog's pairing, published with this torch: the variant build
        return _Choice(found.version, _local(ctx), _quote(found), _src(found), False)
    return _Choice(found.version, None, _quote(found), _src(found), True)


def _src(row: CompanionRelease | TorchRequires) -> str:
    return f"{row.source} [{row.tier}]"


def _release_versions(ctx: Context, out: Findings) -> dict[str, _Choice]:
    """name -> the release this torch pairs with on this variant, and why."""
    assert ctx.patch is not None
    src = f"catalog: {ctx.patch.source} [{ctx.patch.tier}]"
    out_: dict[str, _Choice] = {
        "torch": _Choice(ctx.patch.version, _local(ctx), "", src, False),
    }
    for name in ("torchvision", "torchaudio"):
        choice = _choose(ctx, name)
        if choice is not None:
            out_[name] = choice
    triton = "pytorch-triton-rocm" if ctx.backend == "rocm" else "triton"
    row, lines = _triton_lines(ctx)
    evidence = (
        f"{ctx.patch.version} requires {_shown(lines)} (its Requires-Dist)"
        if lines
        else f"the catalog pairs triton {ctx.patch.triton}"
    )
    tsrc = f"{row.source} [{row.tier}]" if row is not None and triton == "triton" else src
    out_[triton] = _Choice(ctx.patch.triton, None, f"torch {evidence}", tsrc, False)
    return out_


def _matches(req: Requirement, version: str, local: str | None) -> bool:
    full = Version(f"{version}+{local}" if local else version)
    return req.specifier.contains(full, prereleases=True)


def _exact(req: Requirement) -> str | None:
    """The version of a plain ``name==X`` requirement (no wildcard, no URL), else None."""
    specs = list(req.specifier)
    if req.url or len(specs) != 1 or specs[0].operator not in ("==", "===") or "*" in specs[0].version:
        return None
    try:
        return Version(specs[0].version).public
    except InvalidVersion:
        return None


def _verdict(ctx: Context, name: str, version: str) -> tuple[bool | None, str, str]:
    """(does this release's metadata allow the plan's torch (None: not recorded), evidence, source)."""
    torch = _torch_version(ctx)
    if name == "triton":
        row, lines = _triton_lines(ctx)
        if row is None:
            return None, "", ""
        ok = all(
            Requirement(bare).specifier.contains(Version(version), prereleases=True) for _, bare in lines
        )
        assert ctx.patch is not None
        quote = f"torch {ctx.patch.version} requires {_shown(lines)} (its Requires-Dist)"
        return ok, quote, f"{row.source} [{row.tier}]"
    row_ = _release_rows(ctx, name).get(version)
    if row_ is None:
        return None, "", ""
    return _allows(row_.requires_torch, torch), _quote(row_), f"{row_.source} [{row_.tier}]"


def resolve_pins(ctx: Context, out: Findings) -> None:
    if ctx.patch is None or ctx.variant is None:
        for line in ctx.profile.python.lines:
            if ctx.patch is None and line.kind == "requirement" and line.name:
                _user_line(ctx, out, line, {}, {})
            ctx.requirements.append(line)
        if ctx.uncataloged and ctx.profile.torch.version is not None:  # served, but not in the catalog
            ctx.pins.append(
                Pin(
                    name="torch",
                    version=ctx.uncataloged,
                    local=None if ctx.default_build or ctx.variant is None else ctx.variant,
                    reason=f"{ctx.torch_setting()}; not in the catalog, served by the index",
                )
            )
        return
    pairs = _release_versions(ctx, out)
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
        choice = pairs[pin_name]
        ctx.pins.append(
            Pin(
                name=pin_name,
                version=choice.version,
                local=choice.local,
                reason="; ".join(
                    x for x in (wanted[pin_name], choice.evidence, f"source: {choice.source}") if x
                ),
            )
        )
        if choice.declared:
            _note_declared(ctx, out, pin_name, choice)
    if ctx.patch.tier == "unconfirmed" and "torchvision" in wanted and not _release_rows(ctx, "torchvision"):
        out.info(
            "I-PIN-UNCONFIRMED",
            f"torchvision {pairs['torchvision'].version} for torch {ctx.patch.version} was not seen in a "
            "stored source",
            source=f"catalog: {ctx.patch.source} [{ctx.patch.tier}]",
        )


def _note_declared(ctx: Context, out: Findings, name: str, choice: _Choice) -> None:
    out.info(
        "I-COMPANION-DECLARED",
        f"{name} {choice.version} goes with {ctx.torch_label} by declaration: no {name} release pins this "
        f"torch, and {choice.evidence}; `envbuild validate` imports it and runs its smoke "
        "test on arrival",
        source=choice.source,
    )


def _not_paired(ctx: Context, name: str) -> str:
    """Why ``name`` has no pin for this torch release and backend, and what to do instead."""
    assert ctx.patch is not None
    if name == "torchaudio":
        return f"no torchaudio release's metadata allows torch {ctx.patch.version}; drop torchaudio"
    if name == "triton" and ctx.backend == "rocm":
        return (
            f"{ctx.torch_label} requires pytorch-triton-rocm (pulled in by the ROCm index); PyPI triton "
            "next to ROCm torch is wrong: drop it"
        )
    if name == "pytorch-triton-rocm":
        return f"pytorch-triton-rocm goes with ROCm torch wheels only; {ctx.torch_label} uses triton: drop it"
    return f"it does not go with {ctx.torch_label}"


def _pin_text(name: str, choice: _Choice) -> str:
    return f"{name}=={choice.version}{'+' + choice.local if choice.local else ''}"


def _companion(
    ctx: Context,
    out: Findings,
    where: str,
    req: Requirement,
    name: str,
    pairs: dict[str, _Choice],
    wanted: dict[str, str],
) -> None:
    assert ctx.patch is not None
    if name == "torch":
        choice = pairs["torch"]
        if req.url or not _matches(req, choice.version, choice.local):
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
    _judge(ctx, out, where, str(req), req, name, pairs, wanted)


def _judge(
    ctx: Context,
    out: Findings,
    where: str,
    text: str,
    req: Requirement,
    name: str,
    pairs: dict[str, _Choice],
    wanted: dict[str, str],
) -> bool:
    """A requirement on a companion against the metadata.  True: keep the user's line as written."""
    choice = pairs[name]
    pin = _pin_text(name, choice)
    exact = _exact(req)
    if exact is not None and exact != choice.version:
        ok, evidence, source = _verdict(ctx, name, exact)
        if ok is False:
            out.error(
                "E-COMPANION-MISMATCH",
                f"{where}: {text!r} does not go with {ctx.torch_label}: {evidence}; "
                f"write {pin} (or the bare name {name!r}) or change torch.version",
                source=source,
            )
            return True
        if ok is None:
            out.warning(
                "W-COMPANION-UNRECORDED",
                f"{where}: {text!r} is kept as written, but envbuild has no metadata for {name} {exact}; "
                f"the pin it knows for {ctx.torch_label} is {pin}: `envbuild lock` decides",
            )
            return True
        out.info(
            "I-COMPANION-DECLARED",
            f"{where}: {text!r} is kept: {evidence}, which allows {ctx.torch_label}; "
            "`envbuild validate` imports it and runs its smoke test on arrival",
            source=source,
        )
        return True
    if req.url or not _matches(req, choice.version, choice.local):
        out.error(
            "E-COMPANION-MISMATCH",
            f"{where}: {text!r} excludes {pin}, the {name} release for {ctx.torch_label} "
            f"({choice.evidence}); write the bare name {name!r} to get that pin, or change "
            "torch.version",
            source=choice.source,
        )
        return True
    wanted.setdefault(name, f"companion of {ctx.torch_label} ({where})")
    return False


def _user_line(
    ctx: Context,
    out: Findings,
    line: RequirementLine,
    pairs: dict[str, _Choice],
    wanted: dict[str, str],
) -> bool:
    """Check a user requirement naming a torch-family package; False when a pin supersedes it."""
    req = line_requirement(line)
    if req is None or not applies_on_image(req, ctx.python):
        return True
    name = canonicalize_name(req.name)
    if ctx.patch is None:
        if name == "torch" and ctx.resolved is None:
            out.warning(
                "W-TORCH-UNDECLARED",
                f"{line.origin}: {line.text!r} installs whatever torch build PyPI serves (one CUDA "
                "variant, no "
                "local tag); declare [torch] version so envbuild pins the variant for the target",
            )
        return True
    if name not in pairs:
        code = "E-COMPANION-UNAVAILABLE" if name == "torchaudio" else "E-REQ-CONFLICT"
        out.error(code, f"{line.origin}: {line.text!r}: {_not_paired(ctx, name)}")
        return True
    choice = pairs[name]
    pin = _pin_text(name, choice)
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
    if name == "torch":
        if not _matches(req, choice.version, choice.local):
            out.error(
                "E-REQ-CONFLICT",
                f"{line.origin}: {line.text!r} conflicts with the pin {pin} for {ctx.torch_label}; remove it "
                "(envbuild pins it) or change torch.version / accelerator.version to match",
                source=choice.source,
            )
            return True
    elif _judge(ctx, out, line.origin, line.text, req, name, pairs, wanted):
        return True
    wanted.setdefault(name, f"companion of {ctx.torch_label} ({line.origin})")
    out.info("I-REQ-SUPERSEDED", f"{line.origin}: {line.text!r} is replaced by the exact pin for {name}")
    return False
