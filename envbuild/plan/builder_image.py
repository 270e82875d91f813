"""The builder stage: its image, and the validator's probe ops compiled there.

Two things compile in the builder stage, never in the final image:

- ``[python] build_from_source``: the listed sdists, built into wheels after the locked torch;
- the validator's probe ops (``validate.probe_ops``, on by default when the plan has torch): a C++ op,
  and a CUDA/HIP op on a GPU backend, compiled against the image's torch for the ordered cards' archs.
  validate imports and runs them on arrival, with no compiler there (issue 27 item 5).

For CUDA/ROCm code the stage needs the toolkit's compiler: the ``nvidia/cuda`` devel image (nvcc,
CUDA's headers) or the ``rocm/dev`` ``-complete`` image (hipcc, ROCm's libraries) of the plan's
CUDA/ROCm version on the plan's OS.  The final stage stays on the base image the plan chose
(:func:`envbuild.plan.environment.base_image`) and receives the built wheels and ops, not the
compiler.  Where NVIDIA publishes no devel image for the OS (debian12), a source build is refused
naming the OSes that have one, and only the C++ probe op is built (I-PROBE-OPS-CPU-ONLY).
"""

from __future__ import annotations

from envbuild.errors import choices
from envbuild.plan.context import Context, cite
from envbuild.plan.findings import Findings

_COMPILER_FLAVORS = ("cuda-devel", "rocm-complete")  # a base that has nvcc/hipcc already


def torch_planned(ctx: Context) -> bool:
    """The image installs torch (a catalogued release, or one the catalog does not know yet)."""
    return ctx.patch is not None or bool(ctx.uncataloged)


def builder_stage(ctx: Context, flavor: str, out: Findings) -> tuple[str | None, tuple[str, ...]]:
    """(the builder stage's image when it differs from the base image, else None; the probe ops built).

    An explicit ``base.image`` is used as given: its builder builds the GPU op where nvcc/hipcc is found
    there, and says so in the image's manifest where not."""
    gpu = ctx.backend if ctx.backend in ("cuda", "rocm") else None
    ops: tuple[str, ...] = ("cpp",) if torch_planned(ctx) and ctx.profile.validate_.probe_ops else ()
    gpu_op = bool(ops) and gpu is not None
    all_ops = (*ops, gpu) if gpu_op and gpu else ops
    sources = ctx.profile.python.build_from_source
    if sources and gpu is not None and not ctx.profile.accelerator.targets:
        out.error(
            "E-SOURCE-NO-TARGETS",
            f"python.build_from_source ({', '.join(sources)}) compiles its {gpu.upper()} kernels for the "
            "ordered cards' archs, and accelerator.targets is empty: every arch the torch build carries "
            "would be compiled (hours for flash-attn); set accelerator.targets to the cards you order "
            "(`envbuild targets` lists them)",
        )
    if flavor in _COMPILER_FLAVORS or flavor == "explicit" or not (sources or gpu_op):
        return None, all_ops
    whats = []
    if sources:
        whats.append(f"python.build_from_source ({', '.join(sources)}) is compiled there")
    if gpu_op:
        whats.append(f"the validator's {str(gpu).upper()} probe op is compiled there")
    why = " and ".join(whats)
    setting = ctx.setting("base.os") if ctx.profile.sources.get("base.os", "default") != "default" else ""
    where = f" ({setting})" if setting else ""
    if ctx.backend == "cuda" and ctx.toolkit is not None:
        tk = ctx.toolkit
        repository = ctx.catalog.toolkits.image_repository
        src = cite((f"CUDA {tk.version}", tk), ctx.catalog.toolkits.image_source)
        if ctx.os.id not in tk.image_os:
            no_image = f"{repository} publishes no CUDA {tk.image_version} devel image for {ctx.os.id}{where}"
            if sources:
                out.error(
                    "E-SOURCE-NO-DEVEL-IMAGE",
                    f"python.build_from_source ({', '.join(sources)}) compiles with nvcc in the builder "
                    f"stage, and {no_image}; the devel image exists for {', '.join(tk.image_os)}: set "
                    f"base.os to one of {choices(tk.image_os)}",
                    source=src,
                )
            if gpu_op:
                out.info(
                    "I-PROBE-OPS-CPU-ONLY",
                    f"the validator's CUDA probe op needs nvcc in the builder stage, and {no_image}: only "
                    "its C++ op is built with the image (validate still runs torch's own CUDA kernels and a "
                    f"Triton kernel); base.os = one of {choices(tk.image_os)} builds it too",
                    source=src,
                )
            return None, ops
        image = ctx.catalog.cuda_image(tk, "devel", ctx.os.id)
        what = "nvcc and CUDA's headers"
    elif ctx.backend == "rocm" and ctx.rocm is not None:
        rv = ctx.rocm
        if ctx.os.id not in rv.image_os:
            return None, ops  # the base image is refused already (E-BASE-UNAVAILABLE)
        src = cite((f"ROCm {rv.version}", rv))
        image = ctx.catalog.rocm_image(rv, ctx.os.id, complete=True)
        what = "hipcc and ROCm's libraries"
    else:
        return None, ops
    out.info(
        "I-BUILDER-DERIVED",
        f"builder stage on {image}, with {what}: {why}; the final stage stays on the base image and "
        "receives only what was built",
        source=src,
    )
    return image, all_ops
