"""The builder stage's image for ``[python] build_from_source`` on a GPU backend.

A source build compiles in the builder stage, so that stage needs the toolkit's compiler: the
``nvidia/cuda`` devel image (nvcc, CUDA's headers) or the ``rocm/dev`` ``-complete`` image (hipcc,
ROCm's libraries) of the plan's CUDA/ROCm version on the plan's OS.  The final stage stays on the base
image the plan chose (:func:`envbuild.plan.environment.base_image`): the built wheel is copied over,
the compiler is not.  Where NVIDIA publishes no devel image for the OS (debian12), the build cannot
run, and the plan is refused naming the OSes that have one.
"""

from __future__ import annotations

from envbuild.errors import choices
from envbuild.plan.context import Context, cite
from envbuild.plan.findings import Findings

_COMPILER_FLAVORS = ("cuda-devel", "rocm-complete")  # a base that has nvcc/hipcc already


def builder_image(ctx: Context, flavor: str, out: Findings) -> str | None:
    """The builder stage's image when it differs from the base image, else None (``BASE_IMAGE``).

    Only a source build on CUDA/ROCm needs one; an explicit ``base.image`` (its builder uses it as
    given) and a base that already carries the compiler do not."""
    if not ctx.profile.python.build_from_source or flavor in _COMPILER_FLAVORS or flavor == "explicit":
        return None
    names = ", ".join(ctx.profile.python.build_from_source)
    setting = ctx.setting("base.os") if ctx.profile.sources.get("base.os", "default") != "default" else ""
    where = f" ({setting})" if setting else ""
    if ctx.backend == "cuda" and ctx.toolkit is not None:
        tk = ctx.toolkit
        repository = ctx.catalog.toolkits.image_repository
        src = cite((f"CUDA {tk.version}", tk), ctx.catalog.toolkits.image_source)
        if ctx.os.id not in tk.image_os:
            out.error(
                "E-SOURCE-NO-DEVEL-IMAGE",
                f"python.build_from_source ({names}) compiles with nvcc in the builder stage, and "
                f"{repository} publishes no CUDA {tk.image_version} devel image for {ctx.os.id}{where}; "
                f"the devel image exists for {', '.join(tk.image_os)}: set base.os to one of "
                f"{choices(tk.image_os)}",
                source=src,
            )
            return None
        image = ctx.catalog.cuda_image(tk, "devel", ctx.os.id)
        what = "nvcc and CUDA's headers"
    elif ctx.backend == "rocm" and ctx.rocm is not None:
        rv = ctx.rocm
        if ctx.os.id not in rv.image_os:
            return None  # the base image is refused already (E-BASE-UNAVAILABLE)
        src = cite((f"ROCm {rv.version}", rv))
        image = ctx.catalog.rocm_image(rv, ctx.os.id, complete=True)
        what = "hipcc and ROCm's libraries"
    else:
        return None
    out.info(
        "I-BUILDER-DERIVED",
        f"builder stage on {image}: python.build_from_source ({names}) is compiled there, with {what}; the "
        "final stage stays on the base image and receives only the built wheels",
        source=src,
    )
    return image
