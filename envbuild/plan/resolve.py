"""Resolve the torch release, the wheel variant and the toolkit from the profile and the targets."""

from __future__ import annotations

from packaging.utils import canonicalize_name
from packaging.version import Version

from envbuild.catalog import CudaWheel, PatchEntry, Release
from envbuild.errors import UsageError
from envbuild.findings import Findings
from envbuild.plan.after_resolution import adopt_resolved, apply_served, is_version, uncataloged, wrong_build
from envbuild.plan.context import Context, cite
from envbuild.plan.environment import choose_os
from envbuild.plan.suggest import (
    covers_all,
    cuda_name,
    cuda_variant,
    cuda_wheels_for,
    no_cuda_wheel,
    releases_with,
    unknown_torch,
)
from envbuild.versions import applies_on_image, line_requirement, version_choices, version_tuple


def _has_image(ctx: Context, wheel: CudaWheel) -> bool:
    """An nvidia/cuda image for the wheel's toolkit exists on the profile's OS (or base.image is set)."""
    if ctx.profile.base.image:
        return True
    tk = ctx.catalog.cuda_toolkit(wheel.variant)
    return tk is not None and ctx.os.id in tk.image_os


def _has_rocm_image(ctx: Context, variant: str) -> bool:
    if ctx.profile.base.image:
        return True
    rv = ctx.catalog.rocm_version(variant)
    return rv is not None and ctx.os.id in rv.image_os


def confirmed_releases(ctx: Context) -> list[tuple[Release, PatchEntry]]:
    """Confirmed patches (a ``ga`` release, its patch row not ``unconfirmed``), newest first."""
    found = [
        (rel, patch)
        for rel in ctx.catalog.releases
        if rel.status == "ga"
        for patch in rel.patch
        if patch.tier != "unconfirmed"
    ]
    return sorted(found, key=lambda rp: Version(rp[1].version), reverse=True)


def _publishes(ctx: Context, rel: Release, patch: PatchEntry, wanted: str) -> bool:
    """The release publishes wheels for ``accelerator.version`` on the profile's backend."""
    if ctx.backend == "cuda":
        return any(w.variant == cuda_variant(wanted) for w in cuda_wheels_for(rel, patch.version))
    if ctx.backend == "rocm":
        return any(rocm_matches(w.variant, wanted) for w in rel.rocm)
    return True


def _declares_torch(ctx: Context) -> bool:
    """A requirement line names torch (W-TORCH-UNDECLARED speaks for it)."""
    return any(
        line.kind == "requirement" and line.name and canonicalize_name(line.name) == "torch"
        for line in ctx.profile.python.lines
    )


def exact_torch_line(ctx: Context) -> tuple[str, str] | None:
    """The version and place of the first exact ``torch==X`` requirement line that applies on the image
    (profile packages or a requirements file): ``("2.15.0", "requirements.txt:3: 'torch==2.15.0'")``.

    A pin is read into the plan before resolution, as a typed ``torch.version`` is: the catalog knows
    its CUDA build, its driver floor and whether it exists at all.  ``==2.7.*``, ranges and URLs are not
    exact (the resolver decides them)."""
    for line in ctx.profile.python.lines:
        req = line_requirement(line)
        if req is None or canonicalize_name(req.name) != "torch" or not applies_on_image(req, ctx.python):
            continue
        specs = list(req.specifier)
        if req.url or len(specs) != 1 or specs[0].operator not in ("==", "===") or "*" in specs[0].version:
            continue
        try:
            parsed = Version(specs[0].version)
        except ValueError:  # packaging's InvalidVersion: not a version the catalog could know
            return specs[0].version, f"{line.origin}: {line.text!r}"
        # ==2.15 is 2.15.0 to pip (zero padding), not the series; a local tag is judged against the pin
        release = ".".join(str(n) for n in (*parsed.release, 0, 0)[: max(3, len(parsed.release))])
        public = Version(parsed.public)
        rest = str(public).removeprefix(".".join(map(str, public.release)))
        return release + rest, f"{line.origin}: {line.text!r}"
    return None


def default_torch(ctx: Context, out: Findings) -> str | None:
    """``kind = "pytorch"`` without ``torch.version``: the newest release the catalog has confirmed.

    With ``accelerator.version`` set, the newest confirmed release that publishes that variant (when
    one does).  Nothing when the profile names torch in its requirements instead (that line is judged
    as before) or the catalog confirms no release.
    """
    if ctx.profile.kind != "pytorch" or ctx.profile.torch.version is not None or _declares_torch(ctx):
        return None
    confirmed = confirmed_releases(ctx)
    if not confirmed:
        return None
    newest = confirmed[0][1].version
    chosen, why = newest, "the newest release the catalog has confirmed"
    rows = {p.version: (r, p) for r, p in confirmed}
    wanted = ctx.profile.accelerator.version
    if wanted and ctx.backend in {"cuda", "rocm"}:
        kind = "CUDA" if ctx.backend == "cuda" else "ROCm"
        fitting = [p.version for r, p in confirmed if _publishes(ctx, r, p, wanted)]
        if fitting and fitting[0] != newest:
            chosen = fitting[0]
            why = (
                f"the newest confirmed release with {kind} {wanted} wheels "
                f"({ctx.setting('accelerator.version')}; the newest confirmed release is {newest})"
            )
        elif fitting:
            why += f", and it publishes {kind} {wanted} wheels"
    rel, patch = rows[chosen]
    out.info(
        "I-TORCH-DEFAULT",
        f'kind = "pytorch" without torch.version: installing torch {chosen}, {why}; set torch.version '
        "to choose another release",
        source=cite((f"torch {rel.series}", rel), (f"torch {chosen}", patch)),
    )
    return chosen


def resolve_torch(ctx: Context, out: Findings) -> None:
    """torch release, wheel variant and toolkit; then, with base.os absent, an OS that has its image."""
    _resolve_torch(ctx, out)
    apply_served(ctx, out)
    if ctx.patch is not None or ctx.toolkit is not None or ctx.rocm is not None:
        choose_os(ctx, out)


def _resolve_torch(ctx: Context, out: Findings) -> None:
    typed = ctx.profile.torch.version
    spec = typed
    if spec is None and ctx.resolved is not None:  # a bare line or a dependency brought torch in
        spec = ctx.resolved.version
    if spec is None and (pinned := exact_torch_line(ctx)) is not None:  # torch==X in the requirements
        spec, ctx.torch_line = pinned
    spec = spec or default_torch(ctx, out)
    if spec is None:
        return
    version, _, local = spec.partition("+")
    found = ctx.catalog.find_torch(version)
    if found is None:
        served = ctx.served is not None and is_version(version) and ctx.served.serves(version)
        if ctx.resolved is not None or served:
            uncataloged(ctx, out, version, typed is not None)
        elif typed is not None and ctx.strict_torch:
            raise UsageError(
                f"{ctx.profile.path}: torch.version: {unknown_torch(ctx, spec, version)}"
                + (
                    f"; no index asked serves it either ({ctx.served.describe()})"
                    if ctx.served is not None
                    else "; `envbuild catalog refresh` adds releases published since this catalog, and "
                    "`envbuild check --resolve` asks the index"
                )
            )
        elif ctx.torch_line is not None:
            out.error(
                "E-TORCH-UNKNOWN",
                f"{unknown_torch(ctx, spec, version)}; `envbuild catalog refresh` adds releases published "
                "since this catalog, and `envbuild check --resolve` asks the index",
            )
        else:
            out.error("E-TORCH-UNKNOWN", unknown_torch(ctx, spec, version))
        return
    res = ctx.resolved
    if res is not None and typed is not None and Version(res.version) != Version(found[1].version):
        out.error(
            "E-RESOLVED-TORCH",
            f"{ctx.torch_setting()} plans torch {found[1].version}, but the resolved set installs "
            f"{res.describe()}, brought in by {', '.join(res.brought_by) or 'a dependency'}; "
            "align torch.version with what that requirement needs, or pin that requirement to a release "
            f"that allows torch {found[1].version}",
        )
    src = cite((f"torch {found[0].series}", found[0]), (f"torch {found[1].version}", found[1]))
    ctx.release, ctx.patch = found
    if len(Version(version).release) == 2:
        out.info(
            "I-TORCH-PATCH",
            f"{ctx.torch_setting()} names a series: installing {ctx.patch.version}, its newest patch in the "
            f'catalog (write torch.version = "{ctx.patch.version}" to pin it)',
            source=src,
        )
    if local:
        out.warning(
            "W-TORCH-LOCAL",
            f"{ctx.torch_setting()} carries a local tag (+{local}) that envbuild ignores: it derives the "
            f'+<variant> from the accelerator; write torch.version = "{version}" and set accelerator.version '
            "instead",
        )
    if ctx.backend == "cuda":
        _resolve_cuda_variant(ctx, out)
    elif ctx.backend == "rocm":
        _resolve_rocm_variant(ctx, out)
    else:
        ctx.variant = "cpu"
        if ctx.resolved is not None and wrong_build(ctx, out):  # the CUDA build a bare line brought in
            ctx.variant, ctx.default_build = ctx.resolved.variant, ctx.resolved.local is None
        if ctx.profile.accelerator.version:
            out.warning(
                "W-VERSION-IGNORED",
                f"{ctx.setting('accelerator.version')} is ignored for {ctx.setting('accelerator.backend')}; "
                "remove it, or set accelerator.backend to cuda or rocm",
            )
    _warn_unconfirmed(ctx, out)


def _warn_unconfirmed(ctx: Context, out: Findings) -> None:
    """W-TORCH-UNCONFIRMED for a release whose wheels are not confirmed, naming the chosen variant's row."""
    assert ctx.release is not None and ctx.patch is not None
    if ctx.release.status == "ga":
        return
    row = ctx.cuda_wheel or ctx.rocm_wheel
    variant = row if row is not None and ctx.variant == row.variant else None
    confirmed = confirmed_releases(ctx)
    instead = (
        f', or set torch.version = "{confirmed[0][1].version}", the newest confirmed release'
        if confirmed
        else ""
    )
    out.warning(
        "W-TORCH-UNCONFIRMED",
        f"torch {ctx.patch.version}: which wheels the PyTorch index publishes for it"
        f"{f' ({ctx.variant})' if ctx.variant else ''} is not confirmed; check the index before "
        f"ordering{instead}",
        source=cite(
            (f"torch {ctx.release.series}", ctx.release),
            (f"torch {ctx.patch.version}", ctx.patch),
            (f"{ctx.variant} wheels", variant),
        ),
    )


def _resolve_cuda_variant(ctx: Context, out: Findings) -> None:
    assert ctx.release is not None and ctx.patch is not None
    rel, patch = ctx.release, ctx.patch.version
    available = cuda_wheels_for(rel, patch)
    listing = ", ".join(f"{w.variant} ({cuda_name(w.variant)})" for w in available)
    wanted = ctx.profile.accelerator.version
    if ctx.resolved is not None and adopt_resolved(ctx, out, available):
        return
    if wanted:
        parts = wanted.split(".")
        variant = cuda_variant(wanted)
        wheel = next((w for w in available if w.variant == variant), None)
        ctx.variant = variant
        ctx.toolkit = ctx.catalog.cuda_toolkit(variant)
        if wheel is None:
            out.error(
                "E-VARIANT-UNAVAILABLE",
                no_cuda_wheel(ctx, wanted, variant, available),
                source=cite((f"torch {rel.series}", rel)),
            )
            return
        ctx.cuda_wheel = wheel
        tk = ctx.toolkit
        if tk is not None and len(parts) > 2 and wanted != tk.image_version:
            out.info(
                "I-ACCEL-PATCH",
                f"{ctx.setting('accelerator.version')}: torch {variant} wheels are built with CUDA "
                f"{tk.image_version} and bundle their CUDA runtime; the base image is nvidia/cuda "
                f"{tk.image_version}",
                source=cite((f"CUDA {tk.version}", tk)),
            )
        return
    default = next(w for w in available if w.variant == rel.pypi_default_cuda)
    chosen = default
    reason = "the CUDA build PyPI serves for this release"
    covering = [w for w in available if covers_all(ctx, w)] if ctx.gpu_cards else available
    usable = [w for w in covering if _has_image(ctx, w)]
    if default not in usable and (usable or (covering and default not in covering)):
        chosen = min(usable or covering, key=lambda w: w.variant)
        missing = []
        if default not in covering:
            missing.append(f"has no cubins for {', '.join(sorted({c.id for c in ctx.gpu_cards}))}")
        if not _has_image(ctx, default):
            missing.append(f"has no nvidia/cuda image for {ctx.os.id}")
        reason = f"the PyPI default {default.variant} {' and '.join(missing)}"
    ctx.variant = chosen.variant
    ctx.cuda_wheel = chosen
    ctx.toolkit = ctx.catalog.cuda_toolkit(chosen.variant)
    out.info(
        "I-VARIANT-DERIVED",
        f"accelerator.version not set: using {chosen.variant} ({cuda_name(chosen.variant)}), {reason}; "
        f"torch {patch} publishes {listing}.",
        source=cite((f"torch {rel.series}", rel), (f"{chosen.variant} wheels", chosen)),
    )


def rocm_matches(variant: str, wanted: str) -> bool:
    """``6.3`` / ``6.3.0`` / ``6.3.4`` match rocm6.3; ``6.2`` / ``6.2.4`` match rocm6.2.4."""
    have = version_tuple(variant.removeprefix("rocm"))
    want = version_tuple(wanted)
    if len(want) == 3 and len(have) == 2:
        return want[:2] == have
    if len(want) == 2:
        return have[:2] == want
    return have == want


def _resolve_rocm_variant(ctx: Context, out: Findings) -> None:
    assert ctx.release is not None and ctx.patch is not None
    available = list(ctx.release.rocm)
    listing = ", ".join(w.variant for w in available)
    wanted = ctx.profile.accelerator.version
    src = cite((f"torch {ctx.release.series}", ctx.release))
    if not available:
        with_rocm = [r.series for r in ctx.catalog.releases if r.rocm]
        out.error(
            "E-VARIANT-UNAVAILABLE",
            f"torch {ctx.patch.version} publishes no ROCm wheels ({ctx.torch_setting()}); choose a release "
            f"that does ({', '.join(with_rocm) or 'none in the catalog'}), or another backend",
            source=src,
        )
        return
    res = ctx.resolved
    if res is not None and not wrong_build(ctx, out):
        wheel = next((w for w in available if w.variant == res.variant), None)
        if wanted and not rocm_matches(res.variant, wanted):
            out.error(
                "E-RESOLVED-ROCM",
                f"{ctx.setting('accelerator.version')}, but the resolved set installs {res.describe()}; set "
                f'accelerator.version = "{res.variant.removeprefix("rocm")}" or pin torch to a release with '
                f"ROCm {wanted} wheels",
            )
        ctx.variant, ctx.rocm_wheel = res.variant, wheel
        ctx.rocm = ctx.catalog.rocm_version(res.variant)
        return
    if wanted:
        wheel = next((w for w in available if rocm_matches(w.variant, wanted)), None)
        if wheel is None:
            ctx.variant = f"rocm{wanted}"
            ctx.rocm = next((r for r in ctx.catalog.toolkits.rocm if r.version == wanted), None)
            hint = (
                ' (it looks like a CUDA version: set accelerator.backend = "cuda")'
                if int(wanted.split(".")[0]) >= 11
                else ""
            )
            elsewhere = [
                f"{w.variant} wheels exist for torch {found}"
                for w in ctx.catalog.toolkits.rocm
                if rocm_matches(w.variant, wanted) and (found := releases_with(ctx, w.variant))
            ]
            where = f"; {', '.join(elsewhere)}" if elsewhere else ""
            out.error(
                "E-VARIANT-UNAVAILABLE",
                f"torch {ctx.patch.version} publishes no ROCm {wanted} wheels "
                f"({ctx.setting('accelerator.version')}){hint}; its ROCm wheels are "
                f"{listing}{where}. Set accelerator.version to one of "
                f"{version_choices(w.variant.removeprefix('rocm') for w in available)}, or change "
                "torch.version.",
                source=src,
            )
            return
        if wheel.variant.removeprefix("rocm") != wanted:
            out.info(
                "I-ACCEL-PATCH",
                f"{ctx.setting('accelerator.version')}: using torch's {wheel.variant} wheels and the ROCm "
                f"{wheel.variant.removeprefix('rocm')} base image",
                source=cite((f"{wheel.variant} wheels", wheel)),
            )
    else:
        newest_first = sorted(available, key=lambda w: version_tuple(w.variant.removeprefix("rocm")))[::-1]
        amd = [c.arch for c in ctx.gpu_cards if c.vendor == "amd"]
        covering = [w for w in newest_first if all(a in w.targets for a in amd)]
        usable = [w for w in covering if _has_rocm_image(ctx, w.variant)]
        wheel = (usable or covering or newest_first)[0]
        why = "the newest ROCm build" if wheel is newest_first[0] else "the newest ROCm build usable here"
        out.info(
            "I-VARIANT-DERIVED",
            f"accelerator.version not set: using {wheel.variant}, {why} of torch "
            f"{ctx.patch.version} (published: {listing}).",
            source=cite(src, (f"{wheel.variant} wheels", wheel)),
        )
    ctx.variant = wheel.variant
    ctx.rocm_wheel = wheel
    ctx.rocm = ctx.catalog.rocm_version(wheel.variant)
