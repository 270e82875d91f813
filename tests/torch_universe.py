"""torch's real dependency graph, served offline: the recorded metadata in small stand-in wheels.

tests/data/index-recorded/torch-universe/ holds the METADATA files of every distribution that
`uv pip compile` resolved for torch 2.15.0, 2.14.0 and 2.14.1 on the package index (CPython 3.12,
x86_64-manylinux_2_39), RECORDED from https://pypi.org by ``scripts/record-torch-universe.py`` (see its
recorded.json).  :func:`build_universe` writes, for each, a stand-in wheel with the recorded file name
and the recorded METADATA byte for byte (the package body is one ``__init__.py``: these wheels are for
resolving, never for running), so ``uv`` resolves the real graph (torch -> cuda-toolkit ->
nvidia-*, triton, cuda-bindings) from a loopback index.

Written by hand here, and labelled so where they are built:

- the PyTorch variant index: ``torch-2.14.1+cu130`` carries the recorded 2.14.1 metadata with the local
  tag added to its Version (download.pytorch.org cannot be reached from here to record its own);
  ``torch-2.14.1+cpu`` carries the recorded 2.14.1 metadata without the Linux-only CUDA lines (the CPU
  build depends on no nvidia-* package);
- ``pinstorch 1.0``, a package whose only requirement is ``torch==2.14.0``, as vllm 0.33.0 pins it;
- CUDA's compiler wheels, which the recorded resolutions of torch do not reach (cuda-toolkit's ``nvcc`` and
  ``cccl`` extras, :data:`TOOLKIT_WHEELS`): their names, versions, platform tags and Requires-Dist as the
  real nvidia-cuda-nvcc 13.0.88, -crt 13.0.88, nvidia-nvvm 13.0.88 and nvidia-cuda-cccl 13.0.85 wheels on
  pypi.org have them (nvcc requires nvidia-nvvm, nvidia-cuda-runtime and nvidia-cuda-crt, unversioned;
  the others nothing), and the 13.2.86 ones that cuda-toolkit 13.2.2's extras pin, assumed alike.
"""

from __future__ import annotations

import email.parser
import re
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from index_support import _write_wheel, make_wheel, serve_index

RECORDED = Path(__file__).resolve().parent / "data" / "index-recorded" / "torch-universe"


def _stem(filename: str) -> tuple[str, str]:
    """(distribution stem, version) of a wheel file name: ``torch``, ``2.15.0``."""
    name, version = filename.split("-")[:2]
    return name, version


def _stand_in(dest: Path, filename: str, metadata: bytes) -> Path:
    """A wheel named ``filename`` whose METADATA is ``metadata`` unchanged."""
    stem, version = _stem(filename)
    tags = filename.removesuffix(".whl").split("-")[-3:]
    dist_info = f"{stem}-{version}.dist-info"
    wheel = "\n".join(
        ["Wheel-Version: 1.0", "Generator: envbuild-tests (torch_universe)", "Root-Is-Purelib: false"]
        + [
            f"Tag: {py}-{abi}-{plat}"
            for py in tags[0].split(".")
            for abi in tags[1].split(".")
            for plat in tags[2].split(".")
        ]
    )
    entries = {
        f"{stem}/__init__.py": f'__version__ = "{version}"\n'.encode(),
        f"{dist_info}/METADATA": metadata,
        f"{dist_info}/WHEEL": (wheel + "\n").encode(),
    }
    path = dest / filename
    _write_wheel(path, entries)
    return path


def _with_version(metadata: bytes, version: str) -> bytes:
    return re.sub(rb"(?m)^Version: .*$", f"Version: {version}".encode(), metadata, count=1)


def _without_cuda(metadata: bytes) -> bytes:
    """The metadata without its Linux-only requirements (CUDA libraries, cuda-bindings, triton)."""
    lines = metadata.split(b"\n")
    return b"\n".join(
        line
        for line in lines
        if not (line.startswith(b"Requires-Dist:") and b'platform_system == "Linux"' in line)
    )


# Written by hand (see the module doc): (name, version, platform tag, Requires-Dist).
_MANYLINUX = "manylinux2014_x86_64.manylinux_2_17_x86_64"
_NVCC_REQUIRES = ("nvidia-nvvm", "nvidia-cuda-runtime", "nvidia-cuda-crt")
TOOLKIT_WHEELS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    *(
        row
        for version in ("13.0.88", "13.2.86")
        for row in (
            ("nvidia-cuda-nvcc", version, _MANYLINUX, _NVCC_REQUIRES),
            ("nvidia-cuda-crt", version, _MANYLINUX, ()),
            ("nvidia-nvvm", version, "manylinux2010_x86_64.manylinux_2_12_x86_64", ()),
        )
    ),
    ("nvidia-cuda-cccl", "13.0.85", _MANYLINUX, ()),
)


@dataclass(frozen=True)
class Universe:
    pypi: Path  # the package index's kind: default builds, no local tags
    variants: Path  # a PyTorch variant index: torch 2.14.1+cu130 and +cpu (hand-made, see the module doc)


def build_universe(root: Path) -> Universe:
    pypi, variants = root / "pypi", root / "variants"
    pypi.mkdir(parents=True)
    variants.mkdir(parents=True)
    for meta in sorted(RECORDED.glob("*.whl.metadata")):
        _stand_in(pypi, meta.name.removesuffix(".metadata"), meta.read_bytes())
    # Written by hand: a package that pins torch, as vllm 0.33.0 pins torch==2.14.0.
    make_wheel(pypi, "pinstorch", "1.0", requires=["torch==2.14.0"])
    # Written by hand: CUDA's compiler wheels (see the module doc).
    for name, version, platform, requires in TOOLKIT_WHEELS:
        make_wheel(pypi, name, version, requires=requires, platform_tag=platform, requires_python=">=3")
    # Written by hand: the variant index's builds, from the recorded 2.14.1 metadata (see the module doc).
    recorded = (RECORDED / "torch-2.14.1-cp312-cp312-manylinux_2_28_x86_64.whl.metadata").read_bytes()
    _stand_in(
        variants,
        "torch-2.14.1+cu130-cp312-cp312-manylinux_2_28_x86_64.whl",
        _with_version(recorded, "2.14.1+cu130"),
    )
    cpu = _without_cuda(_with_version(recorded, "2.14.1+cpu"))
    _stand_in(variants, "torch-2.14.1+cpu-cp312-cp312-manylinux_2_28_x86_64.whl", cpu)
    return Universe(pypi=pypi, variants=variants)


def recorded_requires(filename: str) -> list[str]:
    """The Requires-Dist lines of one recorded metadata file (for assertions)."""
    fields = email.parser.BytesParser().parsebytes((RECORDED / f"{filename}.metadata").read_bytes())
    return list(fields.get_all("Requires-Dist") or [])


@dataclass(frozen=True)
class UniverseURLs:
    pypi: str  # http://127.0.0.1:<port>/simple/
    variants: str


@contextmanager
def serve_universe(universe: Universe) -> Iterator[UniverseURLs]:
    with ExitStack() as stack:
        pypi = stack.enter_context(serve_index(universe.pypi))
        variants = stack.enter_context(serve_index(universe.variants))
        yield UniverseURLs(pypi=f"{pypi}/simple/", variants=f"{variants}/simple/")


__all__ = [
    "RECORDED",
    "TOOLKIT_WHEELS",
    "Universe",
    "UniverseURLs",
    "build_universe",
    "recorded_requires",
    "serve_universe",
]
