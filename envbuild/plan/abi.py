"""ABI-coupled packages: compiled torch extensions that load only next to the torch they were built for.

flash-attn, xformers, bitsandbytes, torchao and PyG's torch-scatter / torch-sparse / torch-cluster, and
any direct wheel URL whose local version names its build.  Judged from the declared lines and
``envbuild/data/abi.toml`` (one source per row); nothing is downloaded.

* A direct wheel URL's local version: ``+cu12torch2.7cxx11abiTRUE`` (flash-attn's release wheels; also
  ``+cu124torch2.5`` and ``+rocm63torch2.7...``), ``+pt25cu124`` (PyG), ``+cu128`` / ``+rocm6.3`` /
  ``+cpu`` (PyTorch-index builds).  The torch series must be the plan's; a CUDA build needs a CUDA torch
  of the same major (PyG: the same variant, as its README asks), a ROCm build a ROCm torch of the same
  major; a C++ ABI in the name must be the plan's torch's (``[[cxx11_abi]]``).  A CPU build next to a
  GPU torch works without GPU kernels (W-ABI-NO-GPU).  Python and platform tags are E-WHEEL-TAGS'.
* An exact pin (or a wheel URL) of a recorded release: xformers' and bitsandbytes' Requires-Dist on
  torch, bitsandbytes' GPU library for the plan's CUDA/ROCm, torchao's kernels per torch.
* ``flash-attn==X``: PyPI has source distributions only (``envbuild lock`` says E-SOURCE-NEEDS-TORCH);
  an info says whether the release's own wheels cover the plan, and which URL to write.

Torch-family lines are pins.py's.  Without a planned torch release nothing here applies.  What the checks
compare: the plan's torch, accelerator and C++ ABI (:class:`_Plan`) and a wheel's build read from its local
version label (:class:`_Build`); :func:`flash_attn_for_lock` answers ``envbuild lock``'s
E-SOURCE-NEEDS-TORCH too.

Over 400 lines because: one concern, the ABI match of compiled torch extensions; split, it shared 17 names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envbuild.findings import Findings
from envbuild.models import RequirementLine
from envbuild.plan.abi_data import (
    AbiData,
    FlashAttnRelease,
    TorchaoRelease,
    TorchRequirement,
    load_abi_data,
)
from envbuild.plan.context import Context
from envbuild.plan.pins import FAMILY
from envbuild.versions import applies_on_image, line_requirement, wheel_filename


def _row(rows: Iterable[TorchRequirement | TorchaoRelease | FlashAttnRelease], version: Version) -> int:
    return next((i for i, r in enumerate(rows) if Version(r.version) == version), -1)


# ---- the plan and a wheel's build ----------------------------------------------------------------


def _accel(variant: str | None) -> tuple[str, tuple[int, ...]]:
    """``cu128`` -> ("cuda", (12, 8)); ``rocm6.2.4`` -> ("rocm", (6, 2, 4)); ``cpu`` -> ("cpu", ())."""
    if variant is None:
        return "", ()
    if m := re.fullmatch(r"cu(\d+)", variant):
        return "cuda", _cuda_digits(m.group(1))
    if m := re.fullmatch(r"rocm(\d+(?:\.\d+)*)", variant):
        return "rocm", tuple(int(p) for p in m.group(1).split("."))
    return variant, ()


def _cuda_digits(digits: str) -> tuple[int, ...]:
    """``12`` -> (12,) (a major, as flash-attn names it); ``124`` -> (12, 4); ``118`` -> (11, 8)."""
    if len(digits) <= 2:
        return (int(digits),)
    return int(digits[:-1]), int(digits[-1])


@dataclass(frozen=True)
class _Plan:
    label: str  # "torch 2.9.1+cu128"
    torch: Version
    series: str  # "2.9"
    variant: str | None
    backend: str  # "cuda" | "rocm" | "cpu" (from the variant)
    accel: tuple[int, ...]
    abi: bool | None
    python: str


@dataclass(frozen=True)
class _Build:
    label: str  # the local version as the file name writes it
    style: Literal["flash", "pyg", "variant"]
    series: str | None
    backend: str
    accel: tuple[int, ...]
    abi: bool | None


# ``cu12torch2.7cxx11abiTRUE`` (flash-attn), ``cu128torch2.9.0cxx11abiFALSE`` (third-party flash-attn
# builds name the full torch version), ``cu128.torch2.9.0`` (exllamav3: a dot between the parts).
# Only flash-attn's own naming (torch major.minor) derives the cxx11abi label from the build
# (publish.yml sets FLASH_ATTENTION_FORCE_CXX11_ABI to the label).  The full-version style comes from
# kingbri1/flash-attention's build-wheels.yml (at 0949014d and 15eea1b2), which renames the built wheel
# with a constant "cxx11abiFALSE" whatever ABI the build used: that label says nothing, so it is ignored.
_FLASH = re.compile(
    r"(?:cu(?P<cu>\d+)|rocm(?P<rocm>\d+))[._]?torch(?P<series>\d+\.\d+)(?P<patch>\.\d+)?"
    r"(?:cxx11abi(?P<abi>true|false))?"
)
_PYG = re.compile(r"pt(?P<major>\d)(?P<minor>\d+)(?P<accel>cu\d+|cpu)")
_VARIANT = re.compile(r"cu\d+|rocm\d+(?:\.\d+)*|cpu")


def _parse_build(label: str) -> _Build | None:
    """The build a local version names (``cu12torch2.7cxx11abiTRUE``, ``pt25cu124``, ``cu128``)."""
    text = label.lower()
    if m := _FLASH.fullmatch(text):
        labelled = m.group("abi") is not None and m.group("patch") is None
        abi = m.group("abi") == "true" if labelled else None
        if m.group("cu"):
            return _Build(label, "flash", m.group("series"), "cuda", _cuda_digits(m.group("cu")), abi)
        rocm = m.group("rocm")
        return _Build(label, "flash", m.group("series"), "rocm", (int(rocm[0]), int(rocm[1:] or 0)), abi)
    if m := _PYG.fullmatch(text):
        backend, accel = _accel(m.group("accel"))
        return _Build(label, "pyg", f"{m.group('major')}.{m.group('minor')}", backend, accel, None)
    if _VARIANT.fullmatch(text):
        backend, accel = _accel(text)
        return _Build(label, "variant", None, backend, accel, None)
    return None


def _plan_abi(data: AbiData, torch: Version, variant: str | None) -> bool | None:
    for rule in data.cxx11_abi:
        if SpecifierSet(rule.torch).contains(torch) and (not rule.variants or variant in rule.variants):
            return rule.abi
    return None


def _accel_text(backend: str, accel: tuple[int, ...]) -> str:
    if backend == "cpu":
        return "CPU only"
    name = {"cuda": "CUDA", "rocm": "ROCm"}.get(backend, backend)
    return f"{name} {'.'.join(str(n) for n in accel)}".strip()


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _abi_text(abi: bool) -> str:
    return "the C++11 ABI" if abi else "the pre-C++11 ABI"


def _flag(abi: bool) -> str:
    return "TRUE" if abi else "FALSE"


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


def check_abi(ctx: Context, out: Findings) -> None:
    """Every user requirement that names a binary-coupled build, against the planned torch."""
    if ctx.patch is None:
        return
    data = load_abi_data()
    backend, accel = _accel(ctx.variant)
    torch = Version(ctx.patch.version)
    plan = _Plan(
        label=ctx.torch_label,
        torch=torch,
        series=f"{torch.major}.{torch.minor}",
        variant=ctx.variant,
        backend=backend,
        accel=accel,
        abi=_plan_abi(data, torch, ctx.variant),
        python=ctx.python,
    )
    for line in ctx.requirements:
        req = line_requirement(line)
        if req is None or not applies_on_image(req, ctx.python) or canonicalize_name(req.name) in FAMILY:
            continue
        name = canonicalize_name(req.name)
        if req.url and req.url.lower().split("?")[0].split("#")[0].endswith(".whl"):
            what = wheel_filename(req.url.split("#")[0])
            parts = what.split("-")
            written = parts[1] if len(parts) >= 5 else ""
        else:
            specs = list(req.specifier)
            exact = (
                not req.url and len(specs) == 1 and specs[0].operator == "==" and "*" not in specs[0].version
            )
            written = specs[0].version if exact else ""
            what = f"{name}=={written}"
        try:
            version: Version | None = Version(Version(written).public)
        except InvalidVersion:
            version = None
        build = _parse_build(written.split("+", 1)[1]) if "+" in written else None
        if build is not None:
            _check_build(ctx, out, data, plan, line, name, version, what, build)
        if version is not None and name == "flash-attn" and not req.url:
            _flash_attn_pin(out, data, plan, line, version)
        elif version is not None:
            _check_release(ctx, out, data, plan, line, name, version)


# ---- a wheel's build against the plan ------------------------------------------------------------


def _check_build(
    ctx: Context,
    out: Findings,
    data: AbiData,
    plan: _Plan,
    line: RequirementLine,
    name: str,
    version: Version | None,
    filename: str,
    build: _Build,
) -> None:
    why: list[str] = []
    if build.series is not None and build.series != plan.series:
        why.append(
            f"compiled extensions load only with the torch series they were built against ({build.series})"
        )
    gpu_plan = plan.backend in ("cuda", "rocm")
    if build.backend == "cpu" and gpu_plan:
        out.warning(
            "W-ABI-NO-GPU",
            f"{line.origin}: {filename} is a CPU-only build (+{build.label}) next to {plan.label}: its "
            f"operations have no GPU kernels; use the {name} build for {plan.variant}",
        )
    elif build.backend in ("cuda", "rocm") and plan.backend and build.backend != plan.backend:
        what = "a CPU-only torch" if plan.backend == "cpu" else f"a {_accel_text(plan.backend, ())} torch"
        why.append(f"a {_accel_text(build.backend, ())} build cannot load next to {what}")
    elif build.backend in ("cuda", "rocm") and build.accel and plan.accel:
        exact = build.style == "pyg"
        wanted = plan.accel[: len(build.accel)] if exact else plan.accel[:1]
        if (build.accel if exact else build.accel[:1]) != wanted:
            rule = "the torch wheel's own CUDA variant" if exact else "the same major version"
            why.append(f"a {_accel_text(build.backend, build.accel)} build needs {rule}")
    if build.abi is not None and plan.abi is not None and build.abi != plan.abi:
        why.append(
            f"{plan.label.split('+')[0]} wheels use {_abi_text(plan.abi)}, so a build with "
            f"{_abi_text(build.abi)} fails to import (undefined symbols)"
        )
    if not why:
        return
    built = [f"torch {build.series}"] if build.series else []
    built.append(_accel_text(build.backend, build.accel))
    if build.abi is not None:
        built.append(_abi_text(build.abi))
    if build.style == "flash":
        note, fix = _flash_fix(data, plan, name, version)
    elif build.style == "pyg":
        note, fix = _pyg_fix(data, plan, name)
    else:
        note, fix = (
            "",
            f"use a {name} wheel built for {plan.variant} (+{plan.variant})" if plan.variant else "",
        )
    fixes = [f for f in (fix, _keep_wheel(ctx, data, plan, build)) if f]
    out.error(
        "E-ABI-MISMATCH",
        f"{line.origin}: {filename} is built for {' / '.join(built)}, but the plan installs {plan.label}: "
        + "; ".join([*why, *([note] if note else [])])
        + (f". {_capital('; or '.join(fixes))}" if fixes else ""),
    )


def _flash_fix(data: AbiData, plan: _Plan, name: str, version: Version | None) -> tuple[str, str]:
    """(what the release builds, the wheel that fits the plan), named only as far as abi.toml knows."""
    i = _row(data.flash_attn, version) if name == "flash-attn" and version is not None else -1
    release = data.flash_attn[i] if i >= 0 else None
    note = ""
    if release is not None:
        cuda = ", ".join(str(c) for c in release.cuda)
        note = f"flash-attn {version}'s release builds torch {', '.join(release.torch)} with CUDA {cuda} only"
    if plan.backend != "cuda" or plan.abi is None:
        return note, f"use a {name} build made for {plan.label}"
    if name != "flash-attn":  # another project's naming: say what to look for, not flash-attn's tag
        return note, f"use a wheel of {name} built for torch {plan.series} and CUDA {plan.accel[0]}"
    cp = "cp" + plan.python.replace(".", "")
    url = flash_attn_wheel(data, release, plan) if release is not None else None
    if url is not None:
        return "", f"use the same release's wheel for this plan, {url}"
    tag = f"cu{plan.accel[0]}torch{plan.series}cxx11abi{_flag(plan.abi)}"
    wanted = f"use a {name} wheel built for torch {plan.series} and CUDA {plan.accel[0]} (+{tag}, {cp})"
    return note, wanted + (" from a release that builds one" if release is not None else "")


def _pyg_fix(data: AbiData, plan: _Plan, name: str) -> tuple[str, str]:
    rows = [r for r in data.pyg if r.package == name]
    tag = f"pt{plan.series.replace('.', '')}{plan.variant}"
    wanted = f"use the {name} wheel built for torch {plan.series} and {plan.variant} (+{tag})"
    if plan.backend not in ("cuda", "cpu") or plan.variant is None:
        return (f"PyG publishes CPU and CUDA wheels of {name} only" if rows else ""), ""
    row = next((r for r in rows if r.torch == plan.series), None)
    if row is None:
        if rows:
            return f"PyG publishes {name} wheels for torch {', '.join(r.torch for r in rows)} only", ""
        return "", wanted
    if plan.variant not in row.variants:
        note = f"PyG publishes {name} wheels for torch {plan.series} only for {', '.join(row.variants)}"
        return note, "set accelerator.version to one of those CUDA versions"
    return "", wanted


def _keep_wheel(ctx: Context, data: AbiData, plan: _Plan, build: _Build) -> str:
    """``set torch.version = "X.Y.Z"`` (and accelerator.version) so that this very wheel fits."""
    if build.series is None or build.backend != plan.backend or build.backend not in ("cuda", "cpu"):
        return ""
    found = ctx.catalog.find_torch(build.series)
    if found is None:
        return ""
    release, patch = found
    torch = Version(patch.version)
    variants: list[str | None] = [plan.variant]
    if build.backend == "cuda":
        width = len(build.accel) if build.style == "pyg" else 1
        variants = [w.variant for w in release.cuda if _accel(w.variant)[1][:width] == build.accel[:width]]
    fits = [v for v in variants if build.abi is None or _plan_abi(data, torch, v) in (None, build.abi)]
    if not fits:
        return ""
    variant = plan.variant if plan.variant in fits else fits[-1]
    sets = [f'torch.version = "{patch.version}"'] if torch != plan.torch else []
    if variant != plan.variant and variant is not None:
        toolkit = ctx.catalog.cuda_toolkit(variant)
        if toolkit is None:
            return ""
        sets.append(f'accelerator.version = "{toolkit.version}"')
    return f"set {' and '.join(sets)} to keep this wheel" if sets else ""
