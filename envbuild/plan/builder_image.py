"""The builder stage: its image, CUDA's compiler there, and the validator's probe ops compiled there.

Two things compile in the builder stage, never in the final image:

- ``[python] build_from_source``: the listed sdists, built into wheels after the locked torch;
- the validator's probe ops (``validate.probe_ops``, on by default when the plan has torch): a C++ op,
  and a CUDA/HIP op on a GPU backend, compiled against the image's torch for the ordered cards' archs.
  validate imports and runs them on arrival, with no compiler there (issue 27 item 5).

For CUDA/ROCm code the stage needs the toolkit's compiler (``base.builder`` chooses where it comes from):

- CUDA 13 (a toolkit row with ``toolkit_wheels``), ``base.builder = "auto"``: the builder stage stays on
  the base image, and ``cuda-toolkit[nvcc,cccl]`` (nvcc, crt, nvvm, libcudart, CCCL: about 105 MB from the
  package index) is locked with its hashes at the release the resolved torch requires and installed into
  the builder's own prefix (:data:`envbuild.models.TOOLKIT_IN_BUILDER`), on every OS
  (I-BUILDER-TOOLKIT-WHEELS).  The catalog's release stands in until resolution.  Those wheels share one
  ``nvidia/cu13`` folder, so one ``CUDA_HOME`` serves torch's cpp_extension;
- CUDA 11/12 (their wheels keep each component in its own folder), or ``base.builder = "devel-image"``
  (a package that needs more of the toolkit than those wheels hold): the ``nvidia/cuda`` devel image of the
  plan's toolkit and OS (I-BUILDER-DERIVED).  Where NVIDIA publishes none for the OS (debian12), a source
  build is refused naming the OSes that have one (E-SOURCE-NO-DEVEL-IMAGE), and only the C++ probe op is
  built (I-PROBE-OPS-CPU-ONLY);
- ROCm: the ``rocm/dev`` ``-complete`` image (hipcc, ROCm's libraries).

The final stage stays on the base image the plan chose (:func:`envbuild.plan.environment.base_image`) and
receives the built wheels and ops, not the compiler.
"""

from __future__ import annotations

from dataclasses import dataclass

from envbuild.catalog import CudaToolkit
from envbuild.errors import choices
from envbuild.findings import Findings
from envbuild.models import TOOLKIT_IN_BUILDER
from envbuild.plan.context import Context, cite

_COMPILER_FLAVORS = ("cuda-devel", "rocm-complete")  # a base that has nvcc/hipcc already
DEVEL_IMAGE = "devel-image"  # base.builder: always compile CUDA code on nvidia/cuda's devel image


@dataclass(frozen=True)
class BuilderStage:
    image: str | None  # the builder stage's image when it differs from the base image
    probe_ops: tuple[str, ...]  # the validator's ops built there
    toolkit: str | None = None  # CUDA 13: the cuda-toolkit release whose compiler wheels it installs


def torch_planned(ctx: Context) -> bool:
    """The image installs torch (a catalogued release, or one the catalog does not know yet)."""
    return ctx.patch is not None or bool(ctx.uncataloged)


def _toolkit_release(ctx: Context, tk: CudaToolkit) -> tuple[str, str]:
    """(the cuda-toolkit release the builder's wheels are locked at, and what it rests on)."""
    if ctx.resolved is not None and ctx.resolved.cuda_toolkit:
        return ctx.resolved.cuda_toolkit, f"the release the resolved torch {ctx.resolved.version} requires"
    assumed = str(tk.toolkit_wheels)
    return assumed, (
        f"the release torch's {tk.variant} builds require on the package index, from the catalog; "
        "`envbuild lock` pins the one the resolved torch requires, with its sha256, in "
        "requirements-toolkit.txt"
    )


def builder_stage(ctx: Context, flavor: str, out: Findings) -> BuilderStage:
    """The builder stage's image, the probe ops built there and CUDA's compiler wheels, with why.

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
        return BuilderStage(None, all_ops)
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
        forced = ctx.profile.base.builder == DEVEL_IMAGE
        src = cite((f"CUDA {tk.version}", tk), ctx.catalog.toolkits.image_source)
        if tk.toolkit_wheels and not forced:
            release, basis = _toolkit_release(ctx, tk)
            out.info(
                "I-BUILDER-TOOLKIT-WHEELS",
                f"builder stage on the base image, with nvcc and CUDA's headers from the package index: "
                f"cuda-toolkit[nvcc,cccl]=={release} ({basis}), installed into {TOOLKIT_IN_BUILDER}, which "
                f"the final stage does not copy: {why}; no nvidia/cuda devel image is pulled. "
                f'base.builder = "{DEVEL_IMAGE}" compiles on the devel image instead, for a package that '
                "needs more of the CUDA toolkit than these wheels hold",
                source=cite((f"CUDA {tk.version}", tk)),
            )
            return BuilderStage(None, all_ops, release)
        if forced:
            reason = f"{ctx.setting('base.builder')} asks for it"
        else:
            reason = (
                f"CUDA {tk.version}'s compiler wheels keep each component in its own folder; envbuild "
                "installs nvcc from the package index for CUDA 13 builds only"
            )
        if ctx.os.id not in tk.image_os:
            repository = ctx.catalog.toolkits.image_repository
            no_image = f"{repository} publishes no CUDA {tk.image_version} devel image for {ctx.os.id}{where}"
            auto = ' or base.builder = "auto" (nvcc from the package index, on every OS)'
            if sources:
                out.error(
                    "E-SOURCE-NO-DEVEL-IMAGE",
                    f"python.build_from_source ({', '.join(sources)}) compiles with nvcc in the builder "
                    f"stage, on the devel image ({reason}), and {no_image}; the devel image exists for "
                    f"{', '.join(tk.image_os)}: set base.os to one of {choices(tk.image_os)}"
                    + ("," + auto if forced and tk.toolkit_wheels else ""),
                    source=src,
                )
            if gpu_op:
                out.info(
                    "I-PROBE-OPS-CPU-ONLY",
                    f"the validator's CUDA probe op needs nvcc in the builder stage, from the devel image "
                    f"({reason}), and {no_image}: only its C++ op is built with the image (validate still "
                    f"runs torch's own CUDA kernels and a Triton kernel); base.os = one of "
                    f"{choices(tk.image_os)}"
                    + (auto if forced and tk.toolkit_wheels else "")
                    + " builds it too",
                    source=src,
                )
            return BuilderStage(None, ops)
        image = ctx.catalog.cuda_image(tk, "devel", ctx.os.id)
        what, because = "nvcc and CUDA's headers", f" (the devel image: {reason})"
    elif ctx.backend == "rocm" and ctx.rocm is not None:
        rv = ctx.rocm
        if ctx.os.id not in rv.image_os:
            return BuilderStage(None, ops)  # the base image is refused already (E-BASE-UNAVAILABLE)
        src = cite((f"ROCm {rv.version}", rv))
        image = ctx.catalog.rocm_image(rv, ctx.os.id, complete=True)
        what, because = "hipcc and ROCm's libraries", ""
    else:
        return BuilderStage(None, ops)
    out.info(
        "I-BUILDER-DERIVED",
        f"builder stage on {image}, with {what}: {why}; the final stage stays on the base image and "
        f"receives only what was built{because}",
        source=src,
    )
    return BuilderStage(image, all_ops)
