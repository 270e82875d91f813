"""The torch family and its companions: which torchvision, torchaudio and triton release pairs with the
plan's torch release, from the catalog's rows of their metadata (``Requires-Dist``)."""

from __future__ import annotations

from dataclasses import dataclass

from packaging.requirements import Requirement
from packaging.version import Version

from envbuild.catalog.torch_rows import CompanionRelease, TorchRequires
from envbuild.findings import Findings
from envbuild.plan.context import Context

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
