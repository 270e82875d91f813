# mypy: disable-error-code="import-not-found,no-untyped-call"
"""What the extensions probe needs to build ops on arrival (probe_extensions.py imports this beside it,
after torch): the Triton kernel's source, the cache key of everything a build depends on
(:func:`build_key`), and the toolchain checks.  The ops' sources are in ``_probe_ops``, which also
builds them with the image.

Stateless: the warm worker keeps this module imported from one request to the next.  Like every probe
file, it imports only the standard library and the packages under test.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig

import torch
from _probe_common import error_text

TRITON_SOURCE = """
import triton
import triton.language as tl

@triton.jit
def axpb_kernel(x_ptr, y_ptr, a, b, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, a * x + b, mask=mask)
"""


CACHE_FORMAT = "1"  # bump when the way an op is built changes
# What torch.utils.cpp_extension reads from the environment while it builds: the compiler, flags,
# the CUDA/ROCm homes and target archs.
BUILD_ENV = (
    "CXX",
    "CC",
    "CFLAGS",
    "CXXFLAGS",
    "CPPFLAGS",
    "LDFLAGS",
    "CUDA_HOME",
    "CUDA_PATH",
    "ROCM_HOME",
    "ROCM_PATH",
    "TORCH_CUDA_ARCH_LIST",
    "PYTORCH_ROCM_ARCH",
    "TORCH_DONT_CHECK_COMPILER_ABI",
)


def tool_version(path: str) -> str:
    """``path --version``, or why it could not be read (part of the cache key)."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({type(exc).__name__})"
    return f"{out.returncode}\0{out.stdout}\0{out.stderr}"


def build_key(kind: str, compiler: str, sources: list[str]) -> str:
    """A hash of everything the op's build depends on: torch, Python's ABI, the compiler, flags, source."""
    h = hashlib.sha256()
    items = [
        CACHE_FORMAT,
        kind,
        torch.__version__,
        str(getattr(torch.version, "git_version", "")),
        os.path.dirname(os.path.realpath(torch.__file__)),
        str(os.stat(torch.__file__).st_mtime_ns),  # torch reinstalled at the same version and path
        sys.version,
        str(sysconfig.get_config_var("EXT_SUFFIX")),
        os.path.realpath(compiler),
        tool_version(compiler),
        *(f"{k}={os.environ.get(k, '')}" for k in BUILD_ENV),
        *sources,
    ]
    for item in items:
        h.update(item.encode("utf-8", "surrogateescape") + b"\0")
    return h.hexdigest()[:16]


def build_cause(exc: BaseException) -> str:
    """The cause of a failed build, first: the line naming a missing program or the compiler's first
    error (torch's message starts with the whole ninja command line), else the exception's first line."""
    for line in str(exc).splitlines():
        low = line.lower()
        if any(k in low for k in (": not found", "command not found", "no such file", "error:")):
            return line.strip()[:300]
    return str(error_text(exc))


def toolchain_missing() -> list[str]:
    missing = []
    cxx = os.environ.get("CXX")
    if cxx:  # torch builds with $CXX when it is set, whatever else is installed
        if shutil.which(cxx) is None:
            missing.append(f"C++ compiler {cxx} (from $CXX)")
    elif shutil.which("c++") is None and shutil.which("g++") is None:
        missing.append("C++ compiler (c++ / g++)")
    include = sysconfig.get_paths().get("include", "")
    if not os.path.exists(os.path.join(include, "Python.h")):
        missing.append(f"Python headers ({include}/Python.h)")
    if shutil.which("ninja") is None:
        try:
            import ninja  # noqa: F401
        except ImportError:
            missing.append("ninja (pip install ninja, or the ninja-build package)")
    return missing
