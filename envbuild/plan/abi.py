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

Torch-family lines are pins.py's.  Without a planned torch release nothing here applies.  The plan and a
wheel's build label are read by abi_builds.py; the checks of a recorded release's pin are abi_releases.py's.
"""

from __future__ import annotations

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envbuild.findings import Findings
from envbuild.models import RequirementLine
from envbuild.plan.abi_builds import (
    _abi_text,
    _accel,
    _accel_text,
    _Build,
    _capital,
    _flag,
    _parse_build,
    _Plan,
    _plan_abi,
    _row,
)
from envbuild.plan.abi_data import (
    AbiData,
    load_abi_data,
)
from envbuild.plan.abi_releases import _check_release, _flash_attn_pin, flash_attn_wheel
from envbuild.plan.companion_pairing import FAMILY
from envbuild.plan.context import Context
from envbuild.versions import applies_on_image, line_requirement, wheel_filename

# ---- entry point ---------------------------------------------------------------------------------


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
