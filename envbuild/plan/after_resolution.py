"""After resolution: the plan follows the torch builds the indexes serve and the torch the resolved set
installs (``ctx.served`` / ``ctx.resolved``, from :mod:`envbuild.lock.replan`).

* :func:`apply_served` pins torch with its local tag, without one (the index's default build), adopts
  the default build for a derived CUDA version, or says E-VARIANT-NOT-SERVED with the ways out;
* :func:`adopt_resolved` takes the CUDA build of the resolved torch (E-RESOLVED-CUDA when the profile
  declared another);
* :func:`wrong_build` refuses a build of another backend (a warning on a CPU plan);
* :func:`uncataloged` plans a torch the catalog lacks from what the resolved set says of it.
"""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from envbuild.catalog import CudaWheel
from envbuild.findings import Findings
from envbuild.plan.context import Context, cite
from envbuild.plan.suggest import covers_all, cuda_name, cuda_variant, cuda_wheels_for


def is_version(text: str) -> bool:
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


def _accel_name(variant: str) -> str:
    """``CUDA 13.2`` for cu132, ``ROCm 7.2`` for rocm7.2, ``CPU`` for cpu."""
    if variant.startswith("cu"):
        return cuda_name(variant)
    return f"ROCm {variant.removeprefix('rocm')}" if variant.startswith("rocm") else "CPU"


def wrong_build(ctx: Context, out: Findings) -> bool:
    """The resolved torch is a build of another backend than the profile's: an error (a CPU profile only
    gets a warning: a CUDA build runs on the CPU, at the price of its CUDA wheels)."""
    res = ctx.resolved
    assert res is not None
    family = "cpu" if res.variant == "cpu" else ("rocm" if res.variant.startswith("rocm") else "cuda")
    if family == ctx.backend:
        return False
    how = f"{res.describe()}, brought in by {', '.join(res.brought_by) or 'a dependency'}"
    if ctx.backend == "cpu":
        out.warning(
            "W-RESOLVED-GPU-BUILD",
            f"the resolved set installs {how}: on a CPU machine it runs, but carries gigabytes of "
            f"{_accel_name(res.variant)} libraries; pin torch from the CPU index "
            "(`--index-url https://download.pytorch.org/whl/cpu`, or `--find-links` with +cpu wheels)",
        )
        return True
    out.error(
        "E-RESOLVED-BUILD",
        f"{ctx.setting('accelerator.backend')}, but the resolved set installs {how}, which cannot use "
        f"{'an AMD' if ctx.backend == 'rocm' else 'an NVIDIA'} card; resolve against the PyTorch "
        f"{ctx.backend} index (`--index-url https://download.pytorch.org/whl/<variant>`) or declare "
        "[torch] version so envbuild pins the build",
    )
    return True


def adopt_resolved(ctx: Context, out: Findings, available: list[CudaWheel]) -> bool:
    """The resolved set's torch decides the CUDA build; a declared accelerator.version that differs is an
    error naming both.  False when the resolved build is not a CUDA one (handled by wrong_build)."""
    res = ctx.resolved
    assert res is not None and ctx.patch is not None
    if wrong_build(ctx, out):
        return False
    wanted = ctx.profile.accelerator.version
    if wanted and cuda_variant(wanted) != res.variant:
        out.error(
            "E-RESOLVED-CUDA",
            f"{ctx.setting('accelerator.version')} asks for {cuda_name(cuda_variant(wanted))}, but the "
            f"resolved set installs {res.describe()}, brought in by "
            f'{", ".join(res.brought_by) or "a dependency"}; set accelerator.version = "{res.cuda}", or '
            f"pin torch to a release with {cuda_name(cuda_variant(wanted))} wheels from the PyTorch index",
        )
    ctx.variant = res.variant
    ctx.default_build = res.local is None
    ctx.toolkit = ctx.catalog.cuda_toolkit(res.variant)
    ctx.cuda_wheel = next((w for w in available if w.variant == res.variant), None)
    if ctx.toolkit is None:
        out.error(
            "E-VARIANT-UNAVAILABLE",
            f"the resolved set installs {res.describe()}, a CUDA build the catalog has no toolkit row for; "
            "`envbuild catalog refresh` may know it",
        )
        return True
    if ctx.cuda_wheel is None:
        out.warning(
            "W-ARCH-UNKNOWN",
            f"the catalog records no arch list for the {res.variant} build of torch {res.version}: whether "
            "it carries kernels for the targets is not checked",
        )
    if wanted and ctx.default_build:
        out.info(
            "I-INDEX-DEFAULT-BUILD",
            f"the resolved torch {res.version} is the index's default build, the {res.variant} build the "
            f"plan needs ({res.evidence}), so torch is pinned as torch=={res.version}, without a local tag",
        )
    if not wanted:
        out.info(
            "I-VARIANT-RESOLVED",
            f"accelerator.version not set: the resolved set installs {res.describe()}, so the plan uses "
            f"{cuda_name(res.variant)}, driver >= {ctx.toolkit.driver}",
            source=cite((f"CUDA {ctx.toolkit.version}", ctx.toolkit)),
        )
    return True


def uncataloged(ctx: Context, out: Findings, version: str, typed: bool) -> None:
    """A torch the catalog lacks, but that an index serves or the resolved set installs: pinned as served,
    its build taken from the resolved set (no arch list, companions or ABI rows are known for it)."""
    ctx.uncataloged = str(Version(version).public)
    what = "torch.version" if typed else "a dependency's pin"
    out.warning(
        "W-TORCH-UNCATALOGED",
        f"torch {ctx.uncataloged} ({what}) is not in envbuild's catalog, so its arch list, companions and "
        "ABI are not checked; `envbuild catalog refresh` adds releases published since this catalog",
    )
    res = ctx.resolved
    if res is None:
        return
    if wrong_build(ctx, out):
        return
    ctx.variant = res.variant
    ctx.default_build = res.local is None
    if res.variant.startswith("cu"):
        ctx.toolkit = ctx.catalog.cuda_toolkit(res.variant)
    elif res.variant.startswith("rocm"):
        ctx.rocm = ctx.catalog.rocm_version(res.variant)


def apply_served(ctx: Context, out: Findings) -> None:
    """Match the plan's torch build with what the indexes serve (``ctx.served``).

    A variant index serves ``torch==X+cuNNN``: pinned with the local tag.  The package index and its
    mirrors serve one default build per release, without a local tag: when that is the build the plan
    needs, it is pinned without the tag; for a CUDA plan whose accelerator.version was derived, the plan
    adopts the default build (and its driver floor); otherwise E-VARIANT-NOT-SERVED says what is served
    and the ways out.  A CPU or ROCm plan never adopts a CUDA build.
    """
    served = ctx.served
    if served is None or ctx.patch is None or ctx.variant is None or ctx.resolved is not None:
        return
    version = ctx.patch.version
    tags = served.locals_for(version)
    if ctx.variant in tags:
        return
    default = ctx.release.pypi_default_cuda if ctx.release is not None else None
    if None in tags and default == ctx.variant:
        ctx.default_build = True
        out.info(
            "I-INDEX-DEFAULT-BUILD",
            f"the index serves torch {version} without a local tag; on Linux x86_64 that build is the "
            f"{default} build ({cuda_name(default)}) the plan needs, so torch is pinned as torch=={version}",
            source=cite((f"torch {ctx.release.series if ctx.release else version}", ctx.release)),
        )
        return
    derived = not ctx.profile.accelerator.version
    if None in tags and default is not None and ctx.backend == "cuda" and derived:
        wheel = next((w for w in cuda_wheels_for(ctx.release, version) if w.variant == default), None)  # type: ignore[arg-type]
        covers = wheel is not None and (not ctx.gpu_cards or covers_all(ctx, wheel))
        toolkit = ctx.catalog.cuda_toolkit(default)
        if covers and toolkit is not None:
            before = ctx.variant
            ctx.variant, ctx.cuda_wheel, ctx.toolkit, ctx.default_build = default, wheel, toolkit, True
            out.info(
                "I-VARIANT-INDEX",
                f"accelerator.version not set: the index serves only the default build of torch {version}, "
                f"{default} ({cuda_name(default)}), not {before}; the plan adopts it: driver >= "
                f"{toolkit.driver}. To keep {before}, resolve against its PyTorch index",
                source=cite((f"CUDA {toolkit.version}", toolkit)),
            )
            return
    _not_served(ctx, out, version, tags, default)


def _not_served(
    ctx: Context, out: Findings, version: str, tags: frozenset[str | None], default: str | None
) -> None:
    served = ctx.served
    assert served is not None and ctx.variant is not None
    need = f"torch {version}+{ctx.variant}"
    url = ctx.catalog.index_url(ctx.variant)
    ways = [
        f"resolve against the PyTorch {ctx.variant} index (`--index-url {url}`)",
        f"give a folder of {ctx.variant} wheels (`--find-links DIR`)",
    ]
    others = [v for v in served.versions_with(ctx.variant) if v != version][:3]
    if others:
        ways.append(f"set torch.version to a release served as +{ctx.variant} ({', '.join(others)})")
    if None in tags and default is not None and ctx.backend == "cuda":
        ways.append(f'set accelerator.version = "{cuda_name(default)[5:]}" to take its default build')
    plain = f"the default build ({default or 'unknown variant'})"
    have = ", ".join(sorted(f"+{t}" if t else plain for t in tags)) if tags else "no build of it"
    out.error(
        "E-VARIANT-NOT-SERVED",
        f"the plan needs {need} ({_accel_name(ctx.variant)}), but the indexes asked serve {have} for "
        f"this target ({served.describe()}); ways out: {'; '.join(ways)}",
    )
