"""What the planner resolved before the rules look at it (mutable while resolving, then read-only)."""

from __future__ import annotations

from dataclasses import dataclass, field

from envbuild.catalog import (
    CardEntry,
    Catalog,
    CudaToolkit,
    CudaWheel,
    OsEntry,
    PatchEntry,
    Release,
    RocmVersion,
    RocmWheel,
)
from envbuild.models import Pin, Profile, RequirementLine


@dataclass
class Context:
    catalog: Catalog
    profile: Profile
    cards: list[CardEntry]
    os: OsEntry
    driver: str | None
    release: Release | None = None
    patch: PatchEntry | None = None
    variant: str | None = None  # "cu128" | "rocm6.3" | "cpu"
    cuda_wheel: CudaWheel | None = None
    rocm_wheel: RocmWheel | None = None
    toolkit: CudaToolkit | None = None
    rocm: RocmVersion | None = None
    compiles: bool = False
    pins: list[Pin] = field(default_factory=list)
    requirements: list[RequirementLine] = field(default_factory=list)
    apt: set[str] = field(default_factory=set)

    @property
    def backend(self) -> str:
        return self.profile.accelerator.backend

    @property
    def python(self) -> str:
        return self.profile.python.version

    @property
    def gpu_cards(self) -> list[CardEntry]:
        return [c for c in self.cards if c.vendor != "cpu"]

    @property
    def torch_label(self) -> str:
        if self.patch is None:
            return "torch"
        return f"torch {self.patch.version}" + (f"+{self.variant}" if self.variant else "")
