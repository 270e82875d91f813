"""The overlay's pairing of torch with its companions, read from their metadata: which torchvision,
torchaudio and triton release each torch release takes, and where that disagrees with the built-in
catalog (:func:`compare`, for ``envbuild catalog refresh`` and ``show``)."""

from __future__ import annotations

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from envbuild.catalog.overlay import CompanionRow, Overlay, TorchRow
from envbuild.catalog.torch_rows import TorchCatalog


def final_release(version: str) -> Version | None:
    try:
        v = Version(version)
    except InvalidVersion:
        return None
    return None if v.is_prerelease or v.is_postrelease or v.is_devrelease or v.local else v


def _contains(requirement: str | None, version: str) -> bool:
    if requirement is None:
        return False
    try:
        return SpecifierSet(requirement).contains(version, prereleases=False)
    except InvalidSpecifier:
        return False


def exact_pin(requirement: str | None) -> str | None:
    """``==2.14.0`` -> 2.14.0; anything else (a range, ``~=``, none) -> None."""
    if not requirement:
        return None
    try:
        specs = list(SpecifierSet(requirement))
    except InvalidSpecifier:
        return None
    if len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version:
        return specs[0].version
    return None


def pair(overlay: Overlay, name: str, torch_version: str) -> tuple[CompanionRow | None, bool]:
    """The ``name`` release for ``torch_version``: one whose metadata pins it exactly (confirmed), else
    the newest whose torch requirement admits it (inferred); (None, False) when none does."""
    rows = [c for c in overlay.companions if c.name == name and not c.yanked and final_release(c.version)]
    exact = [c for c in rows if c.confirmed and exact_pin(c.torch_requirement) == torch_version]
    if exact:
        return max(exact, key=lambda c: Version(c.version)), True
    ranged = [
        c
        for c in rows
        if c.confirmed and c.torch_requirement and _contains(c.torch_requirement, torch_version)
    ]
    if ranged:
        return max(ranged, key=lambda c: Version(c.version)), False
    return None, False


def resolve_triton(overlay: Overlay, row: TorchRow) -> str | None:
    """The triton release torch's requirement selects: the exact pin, else the newest triton on the
    index that satisfies it (``~=3.8.0`` -> 3.8.0 when that is the only 3.8.x)."""
    if row.triton_requirement is None:
        return None
    exact = exact_pin(row.triton_requirement)
    if exact:
        return exact
    found = [
        c.version
        for c in overlay.companions
        if c.name == "triton"
        and not c.yanked
        and final_release(c.version)
        and _contains(row.triton_requirement, c.version)
    ]
    return max(found, key=Version) if found else None


def compare(torch: TorchCatalog, overlay: Overlay) -> tuple[str, ...]:
    """Where the overlay's metadata disagrees with a built-in row (built-in rows stay in force)."""
    out: list[str] = []
    for row in overlay.torch:
        for rel in torch.release:
            patch = next((p for p in rel.patch if p.version == row.version), None)
            if patch is None:
                continue
            if row.confirmed and row.default_variant and row.default_variant != rel.pypi_default_cuda:
                out.append(
                    f"torch {row.version}: the PyPI wheel's metadata names {row.default_variant} "
                    f"(CUDA {row.cuda_major}); the built-in catalog says the PyPI default is "
                    f"{rel.pypi_default_cuda}"
                )
            triton = resolve_triton(overlay, row) if row.confirmed else None
            if triton and triton != patch.triton:
                out.append(
                    f"torch {row.version}: its metadata requires triton{row.triton_requirement} "
                    f"({triton}); the built-in catalog pairs triton {patch.triton}"
                )
            for name, built_in in (("torchvision", patch.torchvision), ("torchaudio", patch.torchaudio)):
                comp, exact = pair(overlay, name, row.version)
                if comp is not None and exact and comp.version != built_in:
                    out.append(
                        f"torch {row.version}: {name} {comp.version}'s metadata pins torch=={row.version}; "
                        f"the built-in catalog pairs {name} {built_in or '(none)'}"
                    )
    return tuple(out)
