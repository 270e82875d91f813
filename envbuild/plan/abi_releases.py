"""The ABI checks of an exact pin of a recorded release (:mod:`envbuild.plan.abi`): xformers' and
bitsandbytes' Requires-Dist on torch, bitsandbytes' GPU library, torchao's kernels per torch, and
whether flash-attn's own release wheels cover the plan (also asked by ``envbuild lock``'s
E-SOURCE-NEEDS-TORCH, through :func:`flash_attn_for_lock`)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from envbuild.findings import Findings
from envbuild.models import RequirementLine
from envbuild.plan.abi_builds import _accel, _flag, _Plan, _plan_abi, _row
from envbuild.plan.abi_data import (
    AbiData,
    FlashAttnRelease,
    TorchaoRelease,
    load_abi_data,
)
from envbuild.plan.context import Context

# ---- recorded releases ---------------------------------------------------------------------------


def _check_release(
    ctx: Context,
    out: Findings,
    data: AbiData,
    plan: _Plan,
    line: RequirementLine,
    name: str,
    version: Version,
) -> None:
    if name == "xformers":
        _xformers(ctx, out, data, plan, line, version)
    elif name == "bitsandbytes":
        _bitsandbytes(out, data, plan, line, version)
    elif name == "torchao":
        _torchao(out, data, plan, line, version)


def _admits(spec: str, torch: Version) -> bool:
    return not spec or SpecifierSet(spec).contains(torch)


def _newest(versions: Iterable[str]) -> str | None:
    return max(versions, key=Version, default=None)


def _xformers(
    ctx: Context, out: Findings, data: AbiData, plan: _Plan, line: RequirementLine, version: Version
) -> None:
    i = _row(data.xformers, version)
    if i < 0 or _admits(data.xformers[i].torch, plan.torch):
        return
    row = data.xformers[i]
    fits = {r.version: r.torch for r in data.xformers if _admits(r.torch, plan.torch)}
    best = _newest(fits)
    fixes = [f"use xformers=={best} (it requires torch{fits[best]})"] if best else []
    pinned = row.torch.removeprefix("==")
    if row.torch.startswith("==") and ctx.catalog.find_torch(pinned) is not None:
        fixes.append(f'set torch.version = "{pinned}"')
    if not fixes:
        fixes.append(f"no recorded xformers release accepts torch {plan.torch}")
    out.error(
        "E-ABI-MISMATCH",
        f"{line.origin}: xformers {version} requires torch{row.torch} (its wheels are built against that "
        f"torch), but the plan installs {plan.label}: {'; or '.join(fixes)}",
    )


def _bnb_library(plan: _Plan) -> str | None:
    """The library bitsandbytes loads: "cuda" / "rocm" + torch's CUDA/HIP major and minor digits."""
    if plan.backend not in ("cuda", "rocm") or len(plan.accel) < 2:
        return None
    return f"{plan.backend}{plan.accel[0]}{plan.accel[1]}"


def _bnb_text(library: str) -> str:
    m = re.fullmatch(r"(cuda|rocm)(\d+)", library)
    if not m:
        return library
    digits = m.group(2)
    major, minor = (digits[:-1], digits[-1]) if m.group(1) == "cuda" else (digits[0], digits[1:])
    return f"{major}.{minor}"


def _bitsandbytes(out: Findings, data: AbiData, plan: _Plan, line: RequirementLine, version: Version) -> None:
    i = _row(data.bitsandbytes, version)
    if i < 0:
        return
    row = data.bitsandbytes[i]
    library = _bnb_library(plan)
    why: list[str] = []
    if not _admits(row.torch, plan.torch):
        why.append(f"it requires torch{row.torch}")
    if library is not None and library not in row.gpu_libraries:
        kind = library[:4]
        shipped = [_bnb_text(lib) for lib in row.gpu_libraries if lib.startswith(kind)]
        name = "CUDA" if kind == "cuda" else "ROCm"
        wanted = f"{name} {_bnb_text(library)}"
        has = f"GPU libraries for {name} {', '.join(shipped)} only" if shipped else f"no {name} GPU library"
        why.append(f"its wheel carries {has}, so its GPU functions fail to load on {wanted}")
    if not why:
        return
    fits = [
        r.version
        for r in data.bitsandbytes
        if _admits(r.torch, plan.torch) and (library is None or library in r.gpu_libraries)
    ]
    best = _newest(fits)
    fix = f"use bitsandbytes=={best}" if best else "no recorded bitsandbytes release fits this plan"
    out.error(
        "E-ABI-MISMATCH",
        f"{line.origin}: bitsandbytes {version} does not fit {plan.label}: {'; '.join(why)}: {fix}",
    )


def _kernels(row: TorchaoRelease, torch: Version) -> bool:
    if row.kernels_min_torch is not None and torch >= Version(row.kernels_min_torch):
        return True
    if row.kernels_match == "series":
        return any(Version(v).release[:2] == torch.release[:2] for v in row.kernels_torch)
    return any(Version(v) == torch for v in row.kernels_torch)


def _torchao(out: Findings, data: AbiData, plan: _Plan, line: RequirementLine, version: Version) -> None:
    i = _row(data.torchao, version)
    if i < 0 or _kernels(data.torchao[i], plan.torch):
        return
    row = data.torchao[i]
    series = f"{plan.torch.major}.{plan.torch.minor}"
    if row.kernels_min_torch is not None:
        built = f"torch {row.kernels_min_torch} or newer"
    else:
        built = "torch " + ", ".join(row.kernels_torch)
    best = _newest(r.version for r in data.torchao if _kernels(r, plan.torch))
    fix = (
        f"use torchao=={best}, whose C++ kernels support torch {plan.torch}"
        if best
        else f"no recorded torchao release has C++ kernels for torch {plan.torch}"
    )
    api = row.python_api_torch
    if api is None or any(Version(v).release[:2] == plan.torch.release[:2] for v in api):
        if row.kernels_torch or row.kernels_min_torch:
            head = (
                f"torchao {version}'s C++ kernels are built for {built}: they do not load with {plan.label}"
            )
        else:
            head = f"torchao {version} never loads its C++ kernels (its own torch check matches no release)"
        said = (
            f"only its Python API supports torch {series}"
            if api
            else f"whether its Python API supports torch {series} is not recorded"
        )
        out.warning("W-ABI-KERNELS-SKIPPED", f"{line.origin}: {head}; {said}: {fix}")
        return
    supported = ", ".join(dict.fromkeys([*row.kernels_torch, *api]))
    out.error(
        "E-ABI-MISMATCH",
        f"{line.origin}: torchao {version} supports torch {supported}, not {plan.label} (its C++ kernels "
        f"are built for {built}): {fix}",
    )


# ---- flash-attn pins -----------------------------------------------------------------------------


def _covers(row: FlashAttnRelease, series: str, cuda: int, python: str, abi: bool) -> bool:
    return (
        series in row.torch
        and cuda in row.cuda
        and python in row.python
        and abi in row.cxx11_abi
        and f"{series}/{python}" not in row.exclude
    )


def flash_attn_wheel(data: AbiData, row: FlashAttnRelease, plan: _Plan) -> str | None:
    """The URL of the wheel ``row``'s GitHub release builds for the plan; None when its matrix has none."""
    if plan.backend != "cuda" or plan.abi is None:
        return None
    if not _covers(row, plan.series, plan.accel[0], plan.python, plan.abi):
        return None
    return data.flash_attn_url.format(
        version=row.version,
        cuda=plan.accel[0],
        torch=plan.series,
        abi=_flag(plan.abi),
        python="cp" + plan.python.replace(".", ""),
    )


def flash_attn_builds(row: FlashAttnRelease) -> str:
    """What ``row``'s release builds: "torch 2.4, 2.5 with CUDA 12, Python 3.9 to 3.13"."""
    cuda = ", ".join(str(c) for c in row.cuda)
    return f"torch {', '.join(row.torch)} with CUDA {cuda}, Python {row.python[0]} to {row.python[-1]}"


def flash_attn_source(row: FlashAttnRelease) -> str:
    """The finding's source: the release row's."""
    return f"flash-attn {row.version}: {row.source}"


@dataclass(frozen=True)
class FlashAttnWheel:
    """flash-attn's own release wheel for a lock's torch, CUDA major, Python and C++ ABI."""

    plan: str  # "torch 2.7.1+cu128 and Python 3.11"
    url: str | None  # None: the release builds no wheel for it
    builds: str  # what the release builds (flash_attn_builds)
    source: str


def flash_attn_for_lock(
    version: str, torch: str | None, variant: str | None, python: str
) -> FlashAttnWheel | None:
    """What flash-attn ``version``'s GitHub release builds for a lock's torch (``2.7.1``, ``cu128``) and
    Python; None when abi.toml does not record the release or the lock installs no torch."""
    data = load_abi_data()
    try:
        i = _row(data.flash_attn, Version(version))
        release = Version(torch) if torch else None
    except InvalidVersion:
        return None
    if i < 0 or release is None:
        return None
    row = data.flash_attn[i]
    backend, accel = _accel(variant)
    label = f"torch {torch}" + (f"+{variant}" if variant else "")
    plan = _Plan(
        label=label,
        torch=release,
        series=f"{release.major}.{release.minor}",
        variant=variant,
        backend=backend,
        accel=accel,
        abi=_plan_abi(data, release, variant),
        python=python,
    )
    return FlashAttnWheel(
        plan=f"{label} and Python {python}",
        url=flash_attn_wheel(data, row, plan),
        builds=flash_attn_builds(row),
        source=flash_attn_source(row),
    )


def _flash_attn_pin(
    out: Findings, data: AbiData, plan: _Plan, line: RequirementLine, version: Version
) -> None:
    i = _row(data.flash_attn, version)
    if i < 0:
        return
    row = data.flash_attn[i]
    head = (
        f"{line.origin}: flash-attn {version} has no wheel on PyPI (source only, and its build imports torch)"
    )
    url = flash_attn_wheel(data, row, plan)
    if url is not None:
        out.info(
            "I-ABI-WHEEL-URL",
            f"{head}; its GitHub release builds one for {plan.label} and Python {plan.python}: write "
            f"'flash-attn @ {url}'",
            source=flash_attn_source(row),
        )
        return
    out.info(
        "I-ABI-WHEEL-URL",
        f"{head}, and its GitHub release builds none for {plan.label} with Python {plan.python} (it builds "
        f"{flash_attn_builds(row)}): pick a torch and Python it covers, or a direct wheel URL built for "
        "this plan",
        source=flash_attn_source(row),
    )
