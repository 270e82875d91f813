"""The builder stage's source build (``[python] build_from_source``): what the Dockerfile needs.

The build runs after the locked torch is in the venv (``pip wheel --no-build-isolation --no-deps``)
with these variables set on its ``RUN`` line only (nothing reaches the final image):

- the arch list, the ordered cards' archs only (each arch compiled costs a full pass of the kernels):
  ``TORCH_CUDA_ARCH_LIST`` ("8.0;9.0") or ``PYTORCH_ROCM_ARCH`` ("gfx90a;gfx942") for torch's
  ``cpp_extension``, and flash-attn's own ``FLASH_ATTN_CUDA_ARCHS`` ("80;90");
- download shortcuts off, so nothing unhashed enters: ``FLASH_ATTENTION_FORCE_BUILD=TRUE`` (flash-attn's
  ``setup.py`` otherwise downloads a prebuilt wheel from its GitHub releases);
- ``MAX_JOBS``, a build argument ``envbuild build`` chooses from the build machine
  (:func:`max_jobs`), so the bundle's bytes do not depend on the machine that renders it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from envbuild.errors import BundleError
from envbuild.models import PROBE_OPS_IN_IMAGE, TOOLKIT_IN_BUILDER, VENV_PATH_IN_IMAGE, Plan
from envbuild.render.quote import sh

# flash-attn's setup.py (2.7-2.8, ``get_max_jobs``/the MAX_JOBS comment): "each job's peak memory
# cost is ~8-9GB when threads = 4" (NVCC_THREADS).  A job is given this many GiB of the build
# machine's memory; torch's cpp_extension runs MAX_JOBS ninja jobs.
GIB_PER_JOB = 9


@dataclass(frozen=True)
class SourceBuildView:
    env: tuple[tuple[str, str], ...]  # (name, shell-quoted value), set on the build's RUN line only
    names: tuple[str, ...]  # the distributions built from source


def arch_env(plan: Plan) -> list[tuple[str, str]]:
    """torch's cpp_extension arch-list variable for the plan's ordered cards (none on the CPU)."""
    if plan.backend == "cuda":
        return [("TORCH_CUDA_ARCH_LIST", ";".join(_cuda_arch(n) for n in _sm_numbers(plan)))]
    if plan.backend == "rocm":
        archs = sorted({c.arch for c in plan.targets if c.arch})
        return [("PYTORCH_ROCM_ARCH", ";".join(a for a in archs if a.startswith("gfx")))]
    return []


def probe_arch_env(plan: Plan) -> list[tuple[str, str]]:
    """The probe op's arch list: the ordered cards', with PTX of the newest so that a newer card than the
    one ordered still runs it (the driver JIT-compiles the PTX); with no cards ordered, every arch the
    torch build carries (its own list, PTX included).  Never empty on a GPU backend: on a build machine
    without a GPU, torch derives an empty list from the visible devices and fails (an IndexError in
    ``_get_cuda_arch_flags``)."""
    pairs = arch_env(plan)
    if not pairs:
        return []
    name, value = pairs[0]
    if plan.backend == "cuda":
        wheel = ";".join(
            _cuda_arch(a.removeprefix("sm_")) for a in plan.torch_arch_list if a.startswith("sm_")
        )
        return [(name, value + "+PTX" if value else wheel)]
    return [(name, value or ";".join(a for a in plan.torch_arch_list if a.startswith("gfx")))]


def _cuda_arch(number: str) -> str:
    """An sm number as a TORCH_CUDA_ARCH_LIST entry: "90" -> "9.0", "120+PTX" -> "12.0+PTX"."""
    number, ptx, _ = number.partition("+PTX")
    return f"{number[:-1]}.{number[-1]}{ptx}"


def _sm_numbers(plan: Plan) -> list[str]:
    """The ordered cards' CUDA archs as numbers: sm_90 -> "90"."""
    archs = sorted({c.arch for c in plan.targets if c.arch}, key=lambda a: (len(a), a))
    return [n for a in archs if a.startswith("sm_") and (n := a.removeprefix("sm_")).isdigit()]


def source_build_view(plan: Plan) -> SourceBuildView | None:
    from envbuild.render.lockfile import source_names

    names = source_names(plan.profile)
    if not names:
        return None
    flash = [("FLASH_ATTN_CUDA_ARCHS", ";".join(_sm_numbers(plan)))] if plan.backend == "cuda" else []
    pairs = [*arch_env(plan), *flash, ("FLASH_ATTENTION_FORCE_BUILD", "TRUE")]
    return SourceBuildView(
        env=(
            *toolkit_env(plan),
            *((key, sh(value, f"build_from_source {key}")) for key, value in pairs if value),
        ),
        names=names,
    )


def max_jobs(cpus: int, memory_bytes: int) -> int:
    """Parallel compile jobs for a source build: one per CPU, at most one per :data:`GIB_PER_JOB` GiB
    of memory, at least 1."""
    by_memory = memory_bytes // (GIB_PER_JOB << 30)
    return max(1, min(cpus, by_memory))


def build_machine_jobs() -> int:
    """:func:`max_jobs` for this machine (the engine's, when it is local): CPUs this process may use,
    physical memory."""
    import os

    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = GIB_PER_JOB << 30
    return max_jobs(cpus, memory)


def builder_packages(plan: Plan, apt: list[str]) -> list[str]:
    """The builder stage's apt list: ``apt``, plus g++ and the Python headers for a source build or the
    probe ops, and ninja (torch's ``load_inline`` builds with it) for the probe ops."""
    if not (plan.profile.python.build_from_source or plan.probe_ops):
        return apt
    names = {p.split("=", 1)[0] for p in apt}
    dev = "python3-dev" if plan.python_provision == "base-image" else f"python{plan.python_version}-dev"
    extra = ["g++", dev, *(["ninja-build"] if plan.probe_ops else [])]
    return sorted([*apt, *(p for p in extra if p not in names)])


# --------------------------------------------------------------------------------------------------
# The validator's probe ops (issue 27 item 5): compiled in the builder stage, run on arrival.

PROBE_OPS_SCRIPT = "envbuild-probe-ops.py"  # its name in the bundle; the file is the probes' _probe_ops.py
PROBE_OPS_SOURCE = Path(__file__).resolve().parent.parent / "validate" / "probes" / "_probe_ops.py"


@dataclass(frozen=True)
class ProbeOpsView:
    folder: str  # where the final image holds them (the lock's probe_ops_dir)
    args: str  # the build script's options after the folder: "--gpu cuda --require-gpu", or ""
    env: tuple[tuple[str, str], ...]  # the arch list, set on the build's RUN line only
    kinds: tuple[str, ...]


def probe_ops_view(plan: Plan) -> ProbeOpsView | None:
    if not plan.probe_ops:
        return None
    gpu = [k for k in plan.probe_ops if k != "cpp"]
    args = ""
    if gpu:  # the plan lists the GPU op only where the builder has nvcc/hipcc, or on an explicit base.image
        # (used as given: it may lack them, and the manifest then records the op as not built)
        args = f"--gpu {gpu[0]}" + (" --require-gpu" if plan.base_flavor != "explicit" else "")
    env = probe_arch_env(plan)
    return ProbeOpsView(
        folder=PROBE_OPS_IN_IMAGE,
        args=args,
        env=(*toolkit_env(plan), *((key, sh(value, f"probe ops {key}")) for key, value in env)),
        kinds=plan.probe_ops,
    )


# --------------------------------------------------------------------------------------------------
# CUDA 13: the compiler from the package index (plan.builder_toolkit), in the builder stage's own prefix.

TOOLKIT_REQUIREMENTS = "requirements-toolkit.txt"  # written by `envbuild lock` (envbuild.lock.source_files)
_PLAIN_WORD = re.compile(r'[A-Za-z0-9_./:-]+|"[A-Za-z0-9_./:-]+:\$PATH"')


@dataclass(frozen=True)
class ToolkitView:
    """``pip install --target`` of the locked ``cuda-toolkit[nvcc,cccl]`` wheels into :attr:`prefix`, and
    the variables that point torch's cpp_extension at them, set on the compiling ``RUN`` lines only."""

    prefix: str  # never copied to the final stage, which copies the venv (whose nvidia/cuNN the runtime uses)
    home: str  # CUDA_HOME: bin/nvcc, include/, lib/ of the wheels (torch takes lib when lib64 is absent)
    link: str  # build-only folder holding the linker script libcudart.so
    cudart: str  # the runtime library the wheel ships, "libcudart.so.13": the script's INPUT
    requirements: str
    env: tuple[tuple[str, str], ...]


def toolkit_view(plan: Plan) -> ToolkitView | None:
    """None unless the builder installs CUDA's compiler wheels (CUDA 13, ``base.builder = "auto"``).

    The wheels ship ``libcudart.so.13`` and no ``libcudart.so``, so ``-lcudart`` (cpp_extension links it)
    would not link: the linker script ``libcudart.so`` = ``INPUT(libcudart.so.13)`` makes it, and the module
    records NEEDED libcudart.so.13, which the final image's runtime wheel provides.  LIBRARY_PATH holds the
    script's folder and the wheels' lib/ (nvcc's own profile looks for its static libraries under a
    targets/ folder the wheels do not have).  CPATH adds the venv's own CUDA headers (cuBLAS, cuSPARSE, ...:
    torch's dependencies, e.g. for ATen/cuda/CUDAContext.h), after CUDA_HOME's."""
    if plan.builder_toolkit is None or plan.accelerator_version is None:
        return None
    major = plan.accelerator_version.split(".")[0]
    home = f"{TOOLKIT_IN_BUILDER}/nvidia/cu{major}"
    link = f"{TOOLKIT_IN_BUILDER}/link"
    venv_include = (
        f"{VENV_PATH_IN_IMAGE}/lib/python{plan.python_version}/site-packages/nvidia/cu{major}/include"
    )
    env = (
        ("CUDA_HOME", home),
        ("PATH", f'"{home}/bin:$PATH"'),  # expanded by the RUN line's shell (quoted for `export`)
        ("LIBRARY_PATH", f"{link}:{home}/lib"),
        ("CPATH", venv_include),
    )
    for key, value in env:  # fixed paths and a validated Python version: plain shell words, $PATH expands
        if not _PLAIN_WORD.fullmatch(value):
            raise BundleError(f"toolkit variable {key}: unexpected value {value!r}")
    return ToolkitView(
        prefix=TOOLKIT_IN_BUILDER,
        home=home,
        link=link,
        cudart=f"libcudart.so.{major}",
        requirements=TOOLKIT_REQUIREMENTS,
        env=env,
    )


def toolkit_env(plan: Plan) -> tuple[tuple[str, str], ...]:
    """CUDA_HOME and the rest (:func:`toolkit_view`), for a compiling ``RUN`` line; () without the wheels."""
    view = toolkit_view(plan)
    return view.env if view is not None else ()
