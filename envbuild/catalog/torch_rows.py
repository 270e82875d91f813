"""Rows of ``torch.toml``: torch releases and their wheel variants, and the companions' declared pairing."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from envbuild.boundary import INPUT
from envbuild.catalog.rows import (
    CUDA_VARIANT,
    GFX,
    ROCM_VARIANT,
    SERIES,
    VERSION,
    Row,
    fail,
    not_empty,
    shape,
    shapes,
)

_ARCH_ITEM = re.compile(r"^\d+\.\d(\+PTX)?$")


@dataclass(frozen=True, kw_only=True)
class PatchEntry(Row):
    version: str
    torchvision: str
    torchaudio: str | None = None
    triton: str

    def __post_init__(self) -> None:
        super().__post_init__()
        for key in ("version", "torchvision", "torchaudio", "triton"):
            shape(key, getattr(self, key), VERSION, "version")


@dataclass(frozen=True, kw_only=True)
class CudaWheel(Row):
    variant: str
    arch_list: str  # TORCH_CUDA_ARCH_LIST as written upstream: "7.5;8.0;...;12.0+PTX"
    only_patches: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        shape("variant", self.variant, CUDA_VARIANT, "CUDA wheel variant (cuNNN)")
        items = self.arch_list.split(";")
        shapes("arch_list", items, _ARCH_ITEM, "TORCH_CUDA_ARCH_LIST entry (X.Y or X.Y+PTX)")
        if any("+PTX" in item for item in items[:-1]):
            fail("arch_list", "+PTX may only follow the last arch")

    @property
    def archs(self) -> tuple[str, ...]:
        """``("sm_75", ..., "sm_120+PTX")``."""
        return tuple("sm_" + item.replace(".", "") for item in self.arch_list.split(";"))

    @property
    def cubins(self) -> tuple[tuple[int, int], ...]:
        out = []
        for item in self.arch_list.split(";"):
            major, minor = item.removesuffix("+PTX").split(".")
            out.append((int(major), int(minor)))
        return tuple(out)

    @property
    def ptx(self) -> tuple[int, int] | None:
        last = self.arch_list.split(";")[-1]
        if not last.endswith("+PTX"):
            return None
        major, minor = last.removesuffix("+PTX").split(".")
        return int(major), int(minor)


@dataclass(frozen=True, kw_only=True)
class RocmWheel(Row):
    variant: str
    gfx: str

    def __post_init__(self) -> None:
        super().__post_init__()
        shape("variant", self.variant, ROCM_VARIANT, "ROCm wheel variant (rocmX.Y[.Z])")
        shapes("gfx", self.gfx.split(";"), GFX, "gfx target")

    @property
    def targets(self) -> tuple[str, ...]:
        return tuple(self.gfx.split(";"))


@dataclass(frozen=True, kw_only=True)
class Release(Row):
    series: str
    status: Literal["ga", "unconfirmed"]
    python: tuple[str, ...]
    python_experimental: tuple[str, ...] = ()
    pypi_default_cuda: str
    min_glibc: str
    patch: tuple[PatchEntry, ...]
    cuda: tuple[CudaWheel, ...] = ()
    rocm: tuple[RocmWheel, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        shape("series", self.series, SERIES, "release series (X.Y)")
        not_empty("python", self.python)
        shapes("python", self.python, SERIES, "Python version (3.X)")
        shapes("python_experimental", self.python_experimental, SERIES, "Python version (3.X)")
        not_empty("patch", self.patch)


def _requirements_on(key: str, name: str, lines: tuple[str, ...]) -> None:
    from packaging.requirements import InvalidRequirement, Requirement  # on a cache miss only
    from packaging.utils import canonicalize_name

    for line in lines:
        try:
            req = Requirement(line)
        except InvalidRequirement as exc:
            fail(key, f"{line!r} is not a requirement ({exc})")
        if canonicalize_name(req.name) != name:
            fail(key, f"{line!r} is not a requirement on {name}")


@dataclass(frozen=True, kw_only=True)
class CompanionRelease(Row):
    """One torchvision / torchaudio release and the Requires-Dist lines on torch its metadata declares.

    ``requires_torch`` is verbatim from the wheel's METADATA; empty when the release declares no torch
    requirement (torchaudio 2.11.0), which makes it compatible with every torch by declaration.
    """

    name: Literal["torchvision", "torchaudio"]
    version: str
    requires_torch: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        shape("version", self.version, VERSION, "version")
        _requirements_on("requires_torch", "torch", self.requires_torch)


@dataclass(frozen=True, kw_only=True)
class TorchRequires(Row):
    """A torch patch release's own Requires-Dist lines on triton (triton declares nothing about torch)."""

    torch: str
    triton: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        shape("torch", self.torch, VERSION, "version")
        _requirements_on("triton", "triton", self.triton)
        # the markers read once, here (a cache miss), for each Python an image may have; the answers
        # travel with the row in the catalog cache, so a cold check evaluates no marker
        self.__dict__["_on_image"] = _on_image(self.triton, _IMAGE_PYTHONS)

    def triton_on_image(self, python: str) -> tuple[tuple[str, str], ...]:
        """The triton lines whose environment markers hold on the image (CPython ``python``, x86_64
        Linux), each as ``(line as packaging writes it, the requirement without its marker)``."""
        known: dict[str, tuple[tuple[str, str], ...]] = self.__dict__.get("_on_image", {})
        return known[python] if python in known else _on_image(self.triton, (python,))[python]


_IMAGE_PYTHONS = tuple(f"3.{minor}" for minor in range(8, 21))


def _on_image(lines: tuple[str, ...], pythons: tuple[str, ...]) -> dict[str, tuple[tuple[str, str], ...]]:
    from packaging.requirements import Requirement  # on a cache miss only

    from envbuild.versions import applies_on_image

    reqs = [Requirement(line) for line in lines]  # each line's marker evaluated per Python
    bare = [Requirement(line) for line in lines]  # the same, shown without its marker
    for req in bare:
        req.marker = None
    shown = [(str(req), str(plain)) for req, plain in zip(reqs, bare, strict=True)]
    return {
        python: tuple(pair for req, pair in zip(reqs, shown, strict=True) if applies_on_image(req, python))
        for python in pythons
    }


_INDEX_URL = re.compile(r"^https://[^\s]+\{variant\}$")


@dataclass(frozen=True, kw_only=True)
class TorchCatalog:
    __pydantic_config__ = INPUT  # read from outside: see envbuild.boundary

    index_url: str
    index_source: str
    release: tuple[Release, ...]
    companion: tuple[CompanionRelease, ...] = ()
    torch_requires: tuple[TorchRequires, ...] = ()

    def __post_init__(self) -> None:
        shape("index_url", self.index_url, _INDEX_URL, "index URL (https://...{variant})")
        not_empty("release", self.release)
        _check_companions(self)


def _duplicate(kind: str, keys: list[str]) -> None:
    seen: set[str] = set()
    for i, key in enumerate(keys):
        if key in seen:
            fail(f"{kind}[{i}]", f"duplicate {key!r}")
        seen.add(key)


def _check_companions(torch: TorchCatalog) -> None:
    """Every [[release.patch]] companion with a [[companion]] row must be one its metadata allows."""
    from packaging.requirements import Requirement  # on a cache miss only
    from packaging.version import Version

    _duplicate("companion", [f"{c.name} {c.version}" for c in torch.companion])
    _duplicate("torch_requires", [t.torch for t in torch.torch_requires])
    rows: dict[tuple[str, str], CompanionRelease] = {(c.name, c.version): c for c in torch.companion}
    for rel in torch.release:
        for patch in rel.patch:
            for name, version in (("torchvision", patch.torchvision), ("torchaudio", patch.torchaudio)):
                row = rows.get((name, version or ""))
                bad = [
                    line
                    for line in (row.requires_torch if row else ())
                    if not Requirement(line).specifier.contains(Version(patch.version), prereleases=True)
                ]
                if bad:
                    fail(
                        f"patch {patch.version}",
                        f"{name} {version} requires {bad[0]!r} (its [[companion]] row), which excludes "
                        "this torch",
                    )
