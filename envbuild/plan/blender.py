"""Blender: the series must be known; each requested Cycles device must work on every target card."""

from __future__ import annotations

from envbuild.catalog import BlenderSeries, CardEntry
from envbuild.errors import choices
from envbuild.findings import Findings
from envbuild.models import RequirementLine
from envbuild.plan.context import Context, cite
from envbuild.versions import driver_at_least, gfx_major, version_tuple


def _cc(text: str) -> tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)


def _sm(text: str) -> tuple[int, int]:
    digits = text.removeprefix("sm_").removeprefix("compute_")
    return int(digits[:-1]), int(digits[-1])


def optix_driver(ctx: Context) -> str | None:
    """Blender's OptiX minimum driver when OPTIX is requested on an NVIDIA target, else None."""
    version = ctx.profile.blender.version
    if not version or "OPTIX" not in ctx.profile.blender.devices:
        return None
    series = ctx.catalog.blender_series(version)
    if series is None or not any(c.vendor == "nvidia" for c in ctx.cards):
        return None
    return series.optix_min_driver


def check_blender(ctx: Context, out: Findings) -> tuple[str | None, str | None, str | None]:
    """Returns (version, url, sha256_url)."""
    version = ctx.profile.blender.version
    if not version:
        return None, None, None
    series = ctx.catalog.blender_series(version)
    if series is None:
        out.error(
            "E-BLENDER-UNKNOWN",
            f"{ctx.setting('blender.version')}: series not in the catalog; set blender.version to one of "
            f"{choices(s.series for s in ctx.catalog.blender.series)}",
        )
        return version, None, None
    src = cite((f"Blender {series.series}", series))
    if series.tier == "unconfirmed":
        confirmed = [s.series for s in ctx.catalog.blender.series if s.tier != "unconfirmed"]
        newer = [v for v in confirmed if version_tuple(v) > version_tuple(series.series)]
        alt = (newer or confirmed or [""])[0]
        out.warning(
            "W-BLENDER-UNCONFIRMED",
            f"Blender {series.series} ({ctx.setting('blender.version')}): which GPUs its CUDA, OptiX and "
            "HIP kernels cover is not confirmed; test GPU rendering in the pilot"
            + (f', or set blender.version = "{alt}", whose kernel lists are confirmed' if alt else ""),
            source=src,
        )
    if len(version.split(".")) < 3:
        full = f"{version}.0"
        newest = (
            f" (the newest the catalog knows is {series.newest_release})"
            if series.newest_release and series.newest_release != full
            else ""
        )
        out.warning(
            "W-BLENDER-PATCH",
            f"{ctx.setting('blender.version')} names a series: envbuild downloads {full} (every Blender "
            f"series starts at X.Y.0); pin the newest patch{newest} from "
            f"https://download.blender.org/release/Blender{series.series}/ to get its fixes",
            source=cite(
                series.releases_source and f"Blender {series.series} releases: {series.releases_source}"
            ),
        )
        version = full
    if ctx.profile.blender.source == "pypi":
        _bpy(ctx, out, series, version)
        url: str | None = None
        sha: str | None = None
    else:
        url, sha = ctx.catalog.blender_urls(version)
    for device in ctx.profile.blender.devices:
        for card in ctx.cards:
            _device(ctx, _Sourced(out, cite(src, (card.id, card))), series, device, card)
    return version, url, sha


BPY_ORIGIN = "profile:blender.version (blender.source = pypi)"


def _bpy(ctx: Context, out: Findings, series: BlenderSeries, version: str) -> None:
    """``blender.source = "pypi"``: Blender as the ``bpy`` module, pinned to ``version`` as a requirement
    the lock resolves like any other; its wheels exist for one CPython per series."""
    src = cite(series.releases_source and f"bpy {series.series}: {series.releases_source}")
    where = ctx.setting("blender.source")
    if series.bpy_python is None:
        have = [s.series for s in ctx.catalog.blender.series if s.bpy_python]
        out.error(
            "E-BLENDER-BPY-UNAVAILABLE",
            f"{where}: no Linux bpy wheel is published for Blender {series.series}; set blender.source = "
            f'"official", or blender.version to a series with bpy wheels: {choices(have)}',
            source=src,
        )
        return
    if ctx.profile.python.version != series.bpy_python:
        out.error(
            "E-BLENDER-BPY-PYTHON",
            f"{where}: bpy {version} is built for Python {series.bpy_python} only (its wheels are "
            f"cp{series.bpy_python.replace('.', '')}), but {ctx.setting('python.version')}; set "
            f'python.version = "{series.bpy_python}", or blender.source = "official"',
            source=src,
        )
    if series.releases and version not in series.releases:
        newest = series.releases[-1]
        if version_tuple(version) < version_tuple(newest):
            out.error(
                "E-BLENDER-BPY-MISSING",
                f"{ctx.setting('blender.version')}: bpy {version} was never published (bpy skips some "
                f"patch releases); set blender.version to one of {choices(series.releases)}",
                source=src,
            )
        else:
            out.warning(
                "W-BLENDER-BPY-UNLISTED",
                f"{ctx.setting('blender.version')}: bpy {version} is newer than the newest the catalog "
                f'knows ({newest}); the lock fails if it is not published; blender.version = "{newest}" '
                "is known to install",
                source=src,
            )
    ctx.requirements.append(
        RequirementLine(kind="requirement", text=f"bpy=={version}", name="bpy", origin=BPY_ORIGIN)
    )


class _Sourced:
    """The findings of one (device, card) pair, each citing the Blender series' and the card's rows."""

    def __init__(self, out: Findings, source: str | None) -> None:
        self.out, self.source = out, source

    def error(self, code: str, message: str) -> None:
        self.out.error(code, message, source=self.source)

    def warning(self, code: str, message: str) -> None:
        self.out.warning(code, message, source=self.source)


def _device(ctx: Context, out: _Sourced, s: BlenderSeries, device: str, card: CardEntry) -> None:
    name = f"Blender {s.series} {device} on {card.name}"
    devices = ctx.setting("blender.devices")
    if device == "CPU":
        return
    if device == "ONEAPI":
        out.error(
            "E-BLENDER-DEVICE",
            f'{name}: oneAPI renders on Intel Arc GPUs only; {devices}: write "CPU", "CUDA" or "OPTIX" '
            "instead",
        )
        return
    if device in {"CUDA", "OPTIX"}:
        if card.vendor != "nvidia" or card.cc is None:
            alt = {
                "amd": f'AMD Instinct has no Blender HIP kernels either, so render with "CPU" ({devices})',
                "cpu": f'this target has no GPU, so render with "CPU" ({devices})',
            }.get(card.vendor, f'use "CPU" ({devices})')
            out.error("E-BLENDER-DEVICE", f"{name}: {device} needs an NVIDIA GPU; {alt}")
            return
        cc = card.cc
        if device == "OPTIX":
            if cc < _cc(s.optix_min_cc):
                out.error(
                    "E-BLENDER-DEVICE",
                    f'{name}: OptiX needs compute capability >= {s.optix_min_cc}; use "CPU" ({devices})',
                )
            elif ctx.driver and not driver_at_least(ctx.driver, s.optix_min_driver):
                out.error(
                    "E-BLENDER-OPTIX-DRIVER",
                    f"{name}: OptiX needs driver >= {s.optix_min_driver}; driver {ctx.driver} is older. "
                    f'Order a machine with driver >= {s.optix_min_driver}, or use "CUDA" ({devices})',
                )
            return
        if cc < _cc(s.cuda_min_cc):
            out.error(
                "E-BLENDER-DEVICE",
                f'{name}: CUDA needs compute capability >= {s.cuda_min_cc}; use "CPU" ({devices}) or an '
                "older blender.version",
            )
            return
        cubins = [_sm(c) for c in s.cuda_cubins]
        if any(c[0] == cc[0] and c[1] <= cc[1] for c in cubins):
            return
        if s.cuda_ptx and _sm(s.cuda_ptx) <= cc:
            out.warning(
                "W-BLENDER-PTX-JIT",
                f"{name}: no {card.arch} cubin in Blender {s.series}; CUDA JIT-compiles the {s.cuda_ptx} "
                "PTX at "
                "first use (startup delay, needs a driver able to JIT it); OPTIX compiles at runtime and "
                "works",
            )
            return
        out.error(
            "E-BLENDER-DEVICE",
            f'{name}: no {card.arch} kernels and no usable PTX; use "OPTIX" or "CPU" ({devices})',
        )
        return
    # HIP
    if card.vendor != "amd":
        out.error(
            "E-BLENDER-DEVICE",
            f'{name}: HIP needs an AMD GPU; use "CUDA" or "OPTIX" on NVIDIA, or "CPU" ({devices})',
        )
        return
    if gfx_major(card.arch) < s.hip_min_major or card.arch not in s.hip_kernels:
        out.error(
            "E-BLENDER-HIP-UNSUPPORTED",
            f"{name}: Blender ships no HIP kernels for {card.arch} (AMD Instinct is not a Blender HIP target"
            + (f"; from {s.series} gfx9 devices are filtered out" if s.hip_min_major > 9 else "")
            + f'); render with "CPU" on this card ({devices})',
        )
