"""The sourced catalog: cards, torch releases, CUDA/ROCm toolkits, base images, OS/Python, Blender.

The data lives in TOML files under ``envbuild/data/`` (one source and tier per row); this package
loads them once (cached) into typed frozen models and answers look-ups for the planner.

    >>> from envbuild.catalog import load_catalog
    >>> load_catalog().card("h100").arch
    'sm_90'
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from envbuild.catalog.blender_rows import BlenderCatalog, BlenderSeries
from envbuild.catalog.card_rows import CardEntry, LookalikeEntry, PriceEntry, ReserveEntry, Terms
from envbuild.catalog.loader import load_files
from envbuild.catalog.platform_rows import AptSnapshot, OsEntry
from envbuild.catalog.rows import Tier, sm_cc
from envbuild.catalog.toolkit_rows import CudaFamily, CudaToolkit, RocmVersion, Toolkits
from envbuild.catalog.torch_rows import CudaWheel, PatchEntry, Release, RocmWheel, TorchCatalog
from envbuild.resources import catalog_dir, data_dir

if TYPE_CHECKING:
    from envbuild.catalog.overlay import OverlayState

__all__ = [
    "AptSnapshot",
    "BlenderSeries",
    "CardEntry",
    "Catalog",
    "CudaFamily",
    "CudaToolkit",
    "CudaWheel",
    "LookalikeEntry",
    "OsEntry",
    "PatchEntry",
    "PriceEntry",
    "Release",
    "ReserveEntry",
    "RocmVersion",
    "RocmWheel",
    "Terms",
    "Tier",
    "load_catalog",
    "sm_cc",
]


@dataclass(frozen=True)
class Catalog:
    cards: tuple[CardEntry, ...]
    torch: TorchCatalog
    toolkits: Toolkits
    oses: tuple[OsEntry, ...]
    blender: BlenderCatalog
    reserves: tuple[ReserveEntry, ...]
    terms: Terms
    prices: tuple[PriceEntry, ...]
    apt_snapshots: tuple[AptSnapshot, ...] = ()
    lookalikes: tuple[LookalikeEntry, ...] = ()  # cards renters get instead of catalog cards
    # The user's overlay (``envbuild catalog refresh``) merged into ``torch``, or None without one.
    overlay: OverlayState | None = None

    # ---- cards -----------------------------------------------------------------------------------
    def card_ids(self) -> list[str]:
        return [c.id for c in self.cards]

    def card(self, card_id: str) -> CardEntry | None:
        return next((c for c in self.cards if c.id == card_id), None)

    def reserve(self, vendor: str) -> ReserveEntry | None:
        """The memory each device keeps for the vendor's runtime context (None for cpu)."""
        return next((r for r in self.reserves if r.vendor == vendor), None)

    def usable_gib(self, card: CardEntry) -> float:
        """GiB of one device a job can use: the device's memory minus the vendor's reserve."""
        reserve = self.reserve(card.vendor)
        return max(0.0, card.memory_per_device - (reserve.gib if reserve else 0.0))

    # ---- torch -----------------------------------------------------------------------------------
    @property
    def releases(self) -> tuple[Release, ...]:
        return self.torch.release

    def release_versions(self) -> list[str]:
        return [p.version for r in self.releases for p in r.patch]

    def find_torch(self, version: str) -> tuple[Release, PatchEntry] | None:
        """An exact patch (``2.7.1``) or a series (``2.7`` -> its newest patch).

        Versions compare as PEP 440 versions, so ``2.7.1.0``, ``v2.7.1`` and ``2.07.1`` find 2.7.1;
        pre-, post- and dev-releases find nothing (the catalog lists published releases only).
        """
        try:
            wanted = Version(version)
        except InvalidVersion:
            return None
        if wanted.is_prerelease or wanted.is_postrelease or wanted.local:
            return None
        for rel in self.releases:
            if len(wanted.release) == 2 and Version(rel.series) == wanted:
                return rel, max(rel.patch, key=lambda p: Version(p.version))
            for patch in rel.patch:
                if len(wanted.release) > 2 and Version(patch.version) == wanted:
                    return rel, patch
        return None

    def find_series(self, version: str) -> Release | None:
        """The release series a version belongs to (``2.7.5`` -> 2.7), or None."""
        try:
            parts = Version(version).release
        except InvalidVersion:
            return None
        return next((r for r in self.releases if Version(r.series).release == parts[:2]), None)

    def index_url(self, variant: str) -> str:
        return self.torch.index_url.format(variant=variant)

    # ---- toolkits --------------------------------------------------------------------------------
    def cuda_toolkit(self, variant: str) -> CudaToolkit | None:
        return next((t for t in self.toolkits.cuda if t.variant == variant), None)

    def cuda_family(self, major: int) -> CudaFamily | None:
        return next((f for f in self.toolkits.family if f.major == major), None)

    def rocm_version(self, variant: str) -> RocmVersion | None:
        return next((t for t in self.toolkits.rocm if t.variant == variant), None)

    def cuda_image(self, toolkit: CudaToolkit, flavor: str, os_id: str) -> str:
        tag = toolkit.image_tag.format(flavor=flavor, os=os_id)
        return f"{self.toolkits.image_repository}:{tag}"

    def rocm_image(self, rocm: RocmVersion, os_id: str, *, complete: bool) -> str:
        img = self.toolkits.rocm_image
        repo = img.repository.format(os=os_id.replace("ubuntu", "ubuntu-"))
        tag = (img.complete_tag if complete else img.tag).format(tag=rocm.image_tag)
        return f"{repo}:{tag}"

    # ---- platform / blender ----------------------------------------------------------------------
    def os(self, os_id: str) -> OsEntry | None:
        return next((o for o in self.oses if o.id == os_id), None)

    def apt_snapshot(self, release_id: str) -> AptSnapshot | None:
        return next((a for a in self.apt_snapshots if a.release_id == release_id), None)

    def blender_series(self, version: str) -> BlenderSeries | None:
        series = ".".join(version.split(".")[:2])
        return next((s for s in self.blender.series if s.series == series), None)

    def blender_urls(self, version: str) -> tuple[str, str]:
        series = ".".join(version.split(".")[:2])
        return (
            self.blender.url.format(series=series, version=version),
            self.blender.sha256_url.format(series=series, version=version),
        )


@functools.cache  # not `from functools import cache`: that name is the submodule .cache
def _load(directory: Path) -> Catalog:
    cards, torch, toolkits, platform, blender, prices = load_files(directory)
    return Catalog(
        cards=cards.card,
        torch=torch,
        toolkits=toolkits,
        oses=platform.os,
        blender=blender,
        reserves=cards.reserve,
        terms=prices.terms,
        prices=prices.price,
        apt_snapshots=platform.apt_snapshot,
        lookalikes=cards.lookalike,
    )


def load_catalog(directory: Path | None = None) -> Catalog:
    """Load (once, cached) and validate the catalog; ``directory`` defaults to the packaged data.

    With the default data, the user's overlay (``envbuild catalog refresh``, in the data folder) is
    merged in when the file exists: torch releases the built-in data lacks are added as
    ``unconfirmed`` rows (:mod:`envbuild.catalog.overlay`).  Without the file nothing more is imported
    or read; an explicit ``directory`` is loaded as it is.
    """
    if directory is not None:
        return _load(directory.resolve())
    base = _load(catalog_dir().resolve())
    try:
        path = data_dir() / "catalog-overlay.json"
        st = os.stat(path)
    except (OSError, RuntimeError):  # no overlay, or no home folder to look in
        return base
    return _with_overlay(catalog_dir().resolve(), path, st.st_mtime_ns, st.st_size)


@functools.cache
def _with_overlay(directory: Path, path: Path, mtime_ns: int, size: int) -> Catalog:
    """The catalog in ``directory`` with the overlay at ``path`` (its stat in the cache key)."""
    from envbuild.catalog import overlay, overlay_merge

    base = _load(directory)
    try:
        data = overlay.read(path)
    except overlay.OverlayInvalid as exc:
        return replace(base, overlay=overlay.OverlayState(path=path, error=str(exc)))
    torch, state = overlay_merge.merge(base.torch, base.toolkits, data, path)
    return replace(base, torch=torch, overlay=state)
