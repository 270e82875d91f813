"""What resolution tells the planner: the builds of torch the indexes serve, and the torch that the
resolved set actually installs.

The planner reads both as plain records (:func:`envbuild.plan.check` takes ``served=`` and
``resolved=``); the network is read by :mod:`envbuild.lock.served` and the resolver by
:mod:`envbuild.lock`.  The rules here are pure:

* which torch the resolved set installs, whatever brought it in (the ``[torch]`` table, a bare line, a
  dependency's pin), and which CUDA/ROCm build it is: the local tag (``+cu130``, ``+rocm7.2``, ``+cpu``)
  when it has one, else its ``cuda-toolkit`` / ``nvidia-cuda-runtime*`` dependency (the package index
  serves one build per release, without a local tag), else a CPU build;
* the kind of an index: a PyTorch variant index serves torch with local tags, the package index and
  its mirrors serve the default build without one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from envbuild.models import LockedDistribution

# The distributions whose version is the CUDA version of a torch build without a local tag, most
# telling first: cuda-toolkit (torch >= 2.11 on the package index), then the runtime wheel of CUDA 13
# (unsuffixed) and of CUDA 12/11 (``-cu12``/``-cu11``, torch <= 2.10).
CUDA_EVIDENCE = (
    "cuda-toolkit",
    "nvidia-cuda-runtime",
    "nvidia-cuda-runtime-cu12",
    "nvidia-cuda-runtime-cu11",
)


@dataclass(frozen=True, kw_only=True)
class ResolvedTorch:
    """The torch of a resolved set, and the build it is."""

    version: str  # public version: "2.15.0"
    local: str | None  # the local tag as resolved: "cu130", "cpu"; None for the index's default build
    variant: str  # "cu132", "rocm7.2" or "cpu": what the build needs on the machine
    evidence: str  # "torch 2.15.0 requires cuda-toolkit 13.2.2" / "its local tag +cu130"
    brought_by: tuple[str, ...] = ()  # the declared lines or parent distributions that brought it in
    cuda_toolkit: str | None = None  # the cuda-toolkit release the resolved set installs ("13.0.3.0")

    @property
    def spec(self) -> str:
        return f"torch=={self.version}" + (f"+{self.local}" if self.local else "")

    @property
    def cuda(self) -> str | None:
        """``13.2`` for cu132, None for a ROCm or CPU build."""
        if not self.variant.startswith("cu"):
            return None
        digits = self.variant[2:]
        return f"{digits[:-1]}.{digits[-1]}"

    def describe(self) -> str:
        """``torch 2.15.0 (the cu132 build: torch 2.15.0 requires cuda-toolkit 13.2.2)``."""
        return f"torch {self.version} (the {self.variant} build: {self.evidence})"


def _cuda_variant(version: str) -> str | None:
    try:
        release = Version(version).release
    except InvalidVersion:
        return None
    return f"cu{release[0]}{release[1]}" if len(release) >= 2 else None


def torch_from(distributions: Iterable[LockedDistribution]) -> ResolvedTorch | None:
    """The torch the resolved set installs, or None when it installs none (the builder stage's own
    distributions, ``role = "build"`` or ``"toolkit"``, are not the image's)."""
    by_name = {d.name: d for d in distributions if d.in_image}
    torch = by_name.get("torch")
    if torch is None:
        return None
    local = torch.local
    variant, evidence = "cpu", "no local tag and no CUDA runtime among its dependencies"
    if local and (local.startswith(("cu", "rocm")) or local == "cpu"):
        variant, evidence = local, f"its local tag +{local}"
    else:
        for dist in filter(None, (by_name.get(name) for name in CUDA_EVIDENCE)):
            cuda = _cuda_variant(dist.version)
            if cuda is not None:
                via = "torch" if "torch" in dist.required_by else ", ".join(dist.required_by) or "the profile"
                variant, evidence = cuda, f"{via} requires {dist.name} {dist.version}"
                break
    return ResolvedTorch(
        version=torch.version,
        local=local,
        variant=variant,
        evidence=evidence,
        brought_by=tuple(dict.fromkeys([*torch.declared_by, *torch.required_by])),
        cuda_toolkit=kit.version if (kit := by_name.get("cuda-toolkit")) is not None else None,
    )


@dataclass(frozen=True, kw_only=True)
class ServedTorch:
    """The builds of torch that the resolver's indexes and folders serve for the lock's target."""

    # public version -> the local tags served for it ("" for a build without a local tag), sorted
    builds: dict[str, tuple[str, ...]]
    sources: tuple[str, ...]  # the indexes and folders asked, redacted, in order
    # per source, what it serves: "default builds (no local tag)" or "+cu130, +cpu builds"
    kinds: tuple[str, ...] = ()

    def locals_for(self, version: str) -> frozenset[str | None]:
        """The local tags served for ``version`` (None: the default build, without a local tag)."""
        return frozenset(tag or None for tag in self.builds.get(str(Version(version).public), ()))

    def serves(self, version: str) -> bool:
        return bool(self.locals_for(version))

    def versions_with(self, local: str | None) -> list[str]:
        """Versions served with that local tag, newest first."""
        found = [v for v, tags in self.builds.items() if (local or "") in tags]
        return sorted(found, key=Version, reverse=True)

    def describe(self) -> str:
        """``https://pypi.org/simple: default builds (no local tag); /wheels: +cpu builds``."""
        return (
            "; ".join(f"{src}: {kind}" for src, kind in zip(self.sources, self.kinds, strict=True)) or "none"
        )


def kind_of(locals_seen: Iterable[str]) -> str:
    """How one source's torch files read: a variant index, the default builds, or nothing."""
    tags = sorted(set(locals_seen))
    if not tags:
        return "no torch for this target"
    plain = "" in tags
    variants = [t for t in tags if t]
    parts = []
    if variants:
        parts.append(
            ", ".join(f"+{t}" for t in variants) + " builds (local tags, as a PyTorch variant index)"
        )
    if plain:
        parts.append("default builds without a local tag (the package index's kind)")
    return "; ".join(parts)


__all__ = ["CUDA_EVIDENCE", "ResolvedTorch", "ServedTorch", "kind_of", "torch_from"]
