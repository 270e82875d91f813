"""CUDA's compiler for the builder stage, from the package index (CUDA 13: ``Plan.builder_toolkit``).

``cuda-toolkit[nvcc,cccl]`` at the release the resolved torch requires (the resolved set's own
``cuda-toolkit``; the plan's, from the catalog, when the set has none) is resolved in a second run of the
resolver, constrained to the environment's versions of what both share (:data:`SHARED`), as the build
dependencies of ``[python] build_from_source`` are (:func:`envbuild.lock.source_build.resolve_beside`).
Every distribution of that resolution is locked with ``role = "toolkit"``: cuda-toolkit itself,
nvidia-cuda-nvcc, -crt, nvidia-nvvm, nvidia-cuda-runtime and nvidia-cuda-cccl. The builder stage installs
them all into its own prefix (``requirements-toolkit.txt``, ``pip install --target``), which must be whole:
those the image installs too (cuda-toolkit, nvidia-cuda-runtime; the same versions and files, by the
constraint) are locked once in each role. ``envbuild fetch`` brings every locked file, each once.

CCCL (header-only, read at compile time): where the environment installs nvidia-cuda-cccl already (torch
2.15's set does, for nvshmem: 13.3.5, while cuda-toolkit 13.2.2's ``cccl`` extra pins 13.2.86.*), the
extra would contradict the constraint, so the environment's CCCL is the toolkit's too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from envbuild.lock.source_build import resolve_beside
from envbuild.lock.target import Target
from envbuild.lock.uv import ResolverFailed
from envbuild.models import Finding, LockedDistribution
from envbuild.untrusted import one_line

TOOLKIT = "cuda-toolkit"
CCCL = "nvidia-cuda-cccl"


def toolkit_request(dists: Sequence[LockedDistribution], assumed: str) -> tuple[str, str]:
    """(the cuda-toolkit release to lock, the resolver's input lines)."""
    installed = {d.name: d for d in dists if d.role == "install"}
    kit = installed.get(TOOLKIT)
    release = kit.version if kit is not None else assumed
    if CCCL in installed:  # the environment's CCCL (the constraint pins it)
        lines = [f"{TOOLKIT}[nvcc]=={release}", CCCL]
    else:
        lines = [f"{TOOLKIT}[nvcc,cccl]=={release}"]
    return release, "# envbuild lock: CUDA's compiler for the builder stage\n" + "\n".join(lines) + "\n"


# What the builder's prefix and the image must agree on: the toolkit release, the CUDA runtime an extension
# links against, and CCCL's headers where the environment has them.  The compiler's own parts (nvcc, crt,
# nvvm) live only in the builder's prefix: an environment that installs a newer nvvm (vLLM's set brings
# nvidia-nvvm 13.5 beside torch's CUDA 13.0) leaves the compiler at its release.
SHARED = frozenset({TOOLKIT, "nvidia-cuda-runtime", CCCL})


def shared(dists: Sequence[LockedDistribution]) -> list[LockedDistribution]:
    """The environment's distributions the toolkit resolution is constrained to (:data:`SHARED`)."""
    return [d for d in dists if d.name in SHARED]


def lock_toolkit(
    where: str,
    dists: Sequence[LockedDistribution],
    assumed: str,
    command: list[str],
    work: Path,
    target: Target,
) -> tuple[list[LockedDistribution], list[Finding]]:
    """The toolkit's distributions (``role = "toolkit"``), or the error that stops the lock."""
    release, request = toolkit_request(dists, assumed)
    kit = next((d for d in dists if d.name == TOOLKIT and d.role == "install"), None)
    basis = (
        f"the release {', '.join(kit.required_by) or 'the environment'} requires"
        if kit is not None
        else "the catalog's, as the resolved set installs no cuda-toolkit"
    )
    what = f"the builder stage's CUDA compiler, {TOOLKIT}[nvcc,cccl]=={release} ({basis}),"
    fix = (
        'set base.builder = "devel-image" to compile on nvidia/cuda\'s devel image instead (on an OS that '
        "has one), or pin a torch release whose cuda-toolkit the index serves"
    )
    try:
        found, no_wheel = resolve_beside(command, work / "cuda-toolkit", request, shared(dists), target)
    except ResolverFailed as failed:
        message = (
            f"{where}: {what} does not resolve beside the locked environment for {target.describe()}: "
            f"{one_line(failed.text)} {fix[0].upper()}{fix[1:]}"
        )
        return [], [Finding(severity="error", code="E-TOOLKIT-UNRESOLVED", message=message)]
    if no_wheel:
        message = (
            f"{where}: {what} needs {', '.join(sorted(no_wheel))}, which has no wheel for "
            f"{target.describe()}; {fix}"
        )
        return [], [Finding(severity="error", code="E-TOOLKIT-UNRESOLVED", message=message)]
    return [replace(d, role="toolkit", declared_by=()) for d in found], []
