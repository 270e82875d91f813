"""What the planner resolved before the rules look at it (mutable while resolving, then read-only)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

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
from envbuild.plan.resolved import ResolvedTorch, ServedTorch


class Sourced(Protocol):
    """A catalog row: every one carries its citation and tier."""

    @property
    def source(self) -> str: ...

    @property
    def tier(self) -> str: ...


def cite(*rows: tuple[str, Sourced | None] | str | None) -> str | None:
    """The ``source`` of a finding: ``label: row source`` for each catalog row the verdict rests on,
    ``; ``-separated, without repeats (None when there is none).  Citations stay out of messages."""
    parts: list[str] = []
    for item in rows:
        if item is None:
            continue
        if isinstance(item, str):
            text = item
        else:
            label, row = item
            if row is None:
                continue
            shown = row.source
            if row.tier == "unconfirmed" and "unconfirmed" not in shown:
                shown += " (unconfirmed)"
            text = f"{label}: {shown}"
        if text not in parts:
            parts.append(text)
    return "; ".join(parts) or None


def toml_value(value: object) -> str:
    """A profile value as the user writes it in TOML: ``"12.8"``, ``["h100"]``, ``16``, ``true``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        import json  # for a message only

        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return f"{value:g}" if isinstance(value, float) else str(value)


def profile_value(profile: Profile, key: str) -> object:
    """The value at a dotted key (``accelerator.version``, ``torch.packages[0]``) of a profile."""
    node: object = profile
    for part in key.split("."):
        name, _, index = part.partition("[")
        node = getattr(node, "validate_" if name == "validate" else name)
        if index:
            node = node[int(index.rstrip("]"))]  # type: ignore[index]
    return node


def setting(profile: Profile, key: str, value: object | None = None) -> str:
    """``accelerator.version = "12.8"``, with ``(inherited from profile 'pytorch')`` when a parent set it:
    how messages name a profile key, so an inherited value says where it came from."""
    shown = toml_value(profile_value(profile, key) if value is None else value)
    origin = profile.inherited(key)
    if origin is not None:
        return f"{key} = {shown} ({origin.note()})"
    parent = profile.sources.get(key.partition("[")[0], "")  # a profile built without origins
    if parent.startswith("extends:") and "," not in parent:
        return f"{key} = {shown} (inherited from {parent.removeprefix('extends:')})"
    return f"{key} = {shown}"


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
    cli_targets: bool = False  # --target replaced accelerator.targets
    # From resolution (envbuild.plan.resolved): the torch builds the indexes serve, and the torch the
    # resolved set installs; None before resolution.
    served: ServedTorch | None = None
    resolved: ResolvedTorch | None = None
    default_build: bool = False  # pins carry no local tag: the index serves this variant as its default
    uncataloged: str | None = None  # a torch the catalog lacks, served by an index or installed
    strict_torch: bool = True  # an unknown torch.version is a usage error (False: a finding)
    # An exact ``torch==X`` requirement line read into the plan before resolution (no torch.version):
    # ``requirements.txt:3: 'torch==2.15.0'``; None otherwise.
    torch_line: str | None = None

    @property
    def backend(self) -> str:
        return self.profile.accelerator.backend

    @property
    def python(self) -> str:
        return self.profile.python.version

    @property
    def gpu_cards(self) -> list[CardEntry]:
        return [c for c in self.cards if c.vendor != "cpu"]

    def setting(self, key: str, value: object | None = None) -> str:
        """How a message names a profile key: ``base.os = "ubuntu24.04" (inherited from profile 'x')``."""
        if key == "accelerator.targets" and self.cli_targets:
            return "--target " + " --target ".join(c.id for c in self.cards)
        return setting(self.profile, key, value)

    def torch_setting(self) -> str:
        """``torch.version = "2.7.1"`` (with its origin), or what was installed without one."""
        if self.profile.torch.version is not None:
            return self.setting("torch.version")
        if self.torch_line is not None:
            return self.torch_line
        return f"torch {self.patch.version}, chosen without torch.version" if self.patch else "no torch"

    @property
    def torch_label(self) -> str:
        if self.patch is None:
            return f"torch {self.uncataloged}" if self.uncataloged else "torch"
        if self.default_build and self.variant:  # pinned without a local tag: say which build it is
            return f"torch {self.patch.version} ({self.variant} build)"
        return f"torch {self.patch.version}" + (f"+{self.variant}" if self.variant else "")
