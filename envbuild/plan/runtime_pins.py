"""User pins of NVIDIA runtime wheels (``nvidia-cublas-cu12==...``) next to a planned torch.

torch CUDA wheels pin their own ``nvidia-*`` runtime wheels in their metadata (compat-facts §5: the
wheels bundle the CUDA runtime/cuDNN through ``nvidia-*`` deps), so an exact pin copied from another
build (a ``pip freeze`` of a cu126 machine, say) makes pip's resolver fail, and a ``-cu12`` wheel is
of no use to a CUDA 13 or a ROCm/CPU torch.
"""

from __future__ import annotations

import re

from packaging.utils import canonicalize_name

from envbuild.findings import Findings
from envbuild.plan.context import Context, cite
from envbuild.versions import applies_on_image, line_requirement

_NVIDIA = re.compile(r"^nvidia-[a-z0-9-]+?-cu(\d+)$")


def check_nvidia_pins(ctx: Context, out: Findings) -> None:
    if ctx.patch is None:
        return
    for line in ctx.requirements:
        req = line_requirement(line)
        if req is None:
            continue
        match = _NVIDIA.match(canonicalize_name(req.name))
        if not match or not applies_on_image(req, ctx.python):
            continue
        major = int(match.group(1))
        if ctx.backend != "cuda":
            why = f"{ctx.torch_label} does not use NVIDIA runtime wheels"
        elif ctx.toolkit is not None and ctx.toolkit.major != major:
            why = f"it is a CUDA {major} wheel and {ctx.torch_label} is built with CUDA {ctx.toolkit.version}"
        elif req.specifier:
            why = (
                f"{ctx.torch_label} requires its own exact nvidia-* versions, so a pin from another "
                "build can make pip's resolver fail"
            )
        else:
            continue
        out.warning(
            "W-NVIDIA-PIN",
            f"{line.origin}: {line.text!r}: {why}; drop the line and let torch pull the runtime it needs",
            source=cite(
                (f"torch {ctx.patch.version}", ctx.patch),
                (f"CUDA {ctx.toolkit.version}", ctx.toolkit) if ctx.toolkit else None,
            ),
        )
