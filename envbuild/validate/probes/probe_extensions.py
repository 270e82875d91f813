# mypy: disable-error-code="import-not-found,no-untyped-call"
"""Probe: compile *and run* custom ops (C++; CUDA/HIP on GPU locks), a Triton kernel, extension imports.

Every part reports ``status`` (passed | failed | skipped), and on failure an ``error`` and a ``hint``.
Build directories live in a fresh temporary directory, so nothing is reused from an earlier run.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import sys
import sysconfig
import tempfile
import time
import uuid
from typing import Any

from _probe_common import emit, error_text, read_args

args = read_args()
backend: str = args.get("backend", "cpu")
compile_ops: bool = bool(args.get("compile", True))
packages: list[str] = list(args.get("extensions", []))
parts: list[dict[str, Any]] = []

import torch  # noqa: E402

CPP_SOURCE = r"""
#include <torch/extension.h>
torch::Tensor axpb(torch::Tensor x, double a, double b) {
  auto xc = x.contiguous().to(torch::kFloat64).cpu();
  auto out = torch::empty_like(xc);
  const double* src = xc.data_ptr<double>();
  double* dst = out.data_ptr<double>();
  for (int64_t i = 0; i < xc.numel(); ++i) dst[i] = a * src[i] + b;
  return out;
}
"""

CUDA_SOURCE = r"""
#include <torch/extension.h>
__global__ void axpb_kernel(const float* x, float* y, float a, float b, int64_t n) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + b;
}
torch::Tensor axpb_gpu(torch::Tensor x, double a, double b) {
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  int64_t n = xc.numel();
  int threads = 256;
  int blocks = (int)((n + threads - 1) / threads);
  axpb_kernel<<<blocks, threads>>>(xc.data_ptr<float>(), y.data_ptr<float>(), (float)a, (float)b, n);
  return y;
}
"""
CUDA_DECL = "torch::Tensor axpb_gpu(torch::Tensor x, double a, double b);"

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


def part(name: str, status: str, **info: Any) -> None:
    parts.append({"name": name, "status": status, **info})


def toolchain_missing() -> list[str]:
    missing = []
    cxx = os.environ.get("CXX", "c++")
    if shutil.which(cxx) is None and shutil.which("g++") is None:
        missing.append(f"C++ compiler ({cxx} / g++)")
    include = sysconfig.get_paths().get("include", "")
    if not os.path.exists(os.path.join(include, "Python.h")):
        missing.append(f"Python headers ({include}/Python.h)")
    if shutil.which("ninja") is None:
        try:
            import ninja  # noqa: F401
        except ImportError:
            missing.append("ninja (pip install ninja, or the ninja-build package)")
    return missing


def check_numbers(name: str, got: Any, x: Any, start: float, **info: Any) -> None:
    want = 2.5 * x.double().cpu() + 0.5
    err = float((got.double().cpu() - want).abs().max())
    tol = 1e-12 if got.dtype == torch.float64 else 1e-5
    status = "passed" if err <= tol else "failed"
    extra = (
        {} if status == "passed" else {"error": f"{name} returned wrong numbers: max error {err:g} > {tol:g}"}
    )
    seconds = round(time.perf_counter() - start, 2)
    part(name, status, max_error=err, tolerance=tol, seconds=seconds, **info, **extra)


def cpp_op(build_root: str) -> None:
    from torch.utils.cpp_extension import load_inline

    missing = toolchain_missing()
    if missing:
        part(
            "cpp_op",
            "failed",
            error="cannot compile a C++ extension: missing " + ", ".join(missing),
            hint="install the toolchain in the image (apt: g++ python3-dev ninja-build) or set "
            "validate.compile_extensions = false in the profile",
        )
        return
    start = time.perf_counter()
    build = os.path.join(build_root, "cpp")
    os.makedirs(build)
    try:
        mod = load_inline(
            name=f"envbuild_probe_cpp_{uuid.uuid4().hex[:8]}",
            cpp_sources=CPP_SOURCE,
            functions=["axpb"],
            build_directory=build,
            verbose=False,
        )
        x = torch.randn(4096)
        check_numbers("cpp_op", mod.axpb(x, 2.5, 0.5), x, start)
    except Exception as exc:
        part(
            "cpp_op",
            "failed",
            error=f"C++ extension failed: {error_text(exc)}",
            hint="the compiler output is in the part's detail",
            detail=str(exc)[-1500:],
        )


def gpu_op(build_root: str) -> None:
    from torch.utils.cpp_extension import load_inline

    compiler = "hipcc" if backend == "rocm" else "nvcc"
    # Where torch.utils.cpp_extension looks too: $CUDA_HOME / $ROCM_HOME, then the default install prefix.
    home = os.environ.get("ROCM_HOME" if backend == "rocm" else "CUDA_HOME") or (
        "/opt/rocm" if backend == "rocm" else "/usr/local/cuda"
    )
    found = shutil.which(compiler) or shutil.which(os.path.join(home, "bin", compiler))
    if not found:
        part(
            f"{backend}_op",
            "failed",
            error=f"cannot compile a {backend.upper()} extension: {compiler} not found on PATH",
            hint="use a -devel base image (nvidia/cuda:*-devel, rocm/dev-*) "
            "or set validate.compile_extensions = false",
        )
        return
    start = time.perf_counter()
    build = os.path.join(build_root, backend)
    os.makedirs(build)
    try:
        mod = load_inline(
            name=f"envbuild_probe_{backend}_{uuid.uuid4().hex[:8]}",
            cpp_sources=CUDA_DECL,
            cuda_sources=CUDA_SOURCE,
            functions=["axpb_gpu"],
            build_directory=build,
            verbose=False,
        )
        x = torch.randn(1 << 20, device="cuda")
        y = mod.axpb_gpu(x, 2.5, 0.5)
        torch.cuda.synchronize()
        check_numbers(f"{backend}_op", y, x, start, compiler=found)
    except Exception as exc:
        error = f"{backend.upper()} extension failed: {error_text(exc)}"
        part(f"{backend}_op", "failed", error=error, detail=str(exc)[-1500:])


def triton_kernel(build_root: str) -> None:
    start = time.perf_counter()
    try:
        import triton

        path = os.path.join(build_root, "envbuild_probe_triton_kernel.py")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(TRITON_SOURCE)
        sys.path.insert(0, build_root)
        kmod = importlib.import_module("envbuild_probe_triton_kernel")
        x = torch.randn(100_000, device="cuda")
        y = torch.empty_like(x)
        kmod.axpb_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, 2.5, 0.5, x.numel(), BLOCK=1024)
        torch.cuda.synchronize()
        check_numbers("triton_kernel", y, x, start, triton_version=triton.__version__)
    except Exception as exc:
        part("triton_kernel", "failed", error=f"Triton kernel failed: {error_text(exc)}")


def smoke(module_name: str) -> None:
    start = time.perf_counter()
    try:
        mod = importlib.import_module(module_name)
    except Exception as exc:
        part(f"import:{module_name}", "failed", error=f"import {module_name} failed: {error_text(exc)}")
        return
    info = {"version": str(getattr(mod, "__version__", "")), "seconds": 0.0}
    gpu = backend in ("cuda", "rocm") and torch.cuda.is_available()
    try:
        if module_name in ("flash_attn", "xformers") and gpu:
            q, k, v = (torch.randn(2, 128, 4, 64, device="cuda", dtype=torch.float16) for _ in range(3))
            if module_name == "flash_attn":
                out = mod.flash_attn_func(q, k, v)
            else:
                import xformers.ops as xops

                out = xops.memory_efficient_attention(q, k, v)
            ref = torch.nn.functional.scaled_dot_product_attention(
                q.transpose(1, 2).float(), k.transpose(1, 2).float(), v.transpose(1, 2).float()
            ).transpose(1, 2)
            err = float((out.float() - ref).abs().max())
            ok = err < 2e-2
            info["max_error"], info["tolerance"] = err, 2e-2
        elif module_name == "bitsandbytes" and gpu:
            import bitsandbytes.functional as bnbf

            x = torch.randn(4096, device="cuda")
            q, state = bnbf.quantize_blockwise(x)
            err = float((bnbf.dequantize_blockwise(q, state) - x).abs().max() / x.abs().max())
            ok = err < 0.05
            info["max_error"], info["tolerance"] = err, 0.05
        elif module_name == "triton" and gpu:
            triton_kernel(tempfile.mkdtemp(prefix="envbuild-triton-"))
            return
        else:
            info["smoke"] = "import only (no numeric smoke test for this package on this backend)"
            ok = True
    except Exception as exc:
        part(f"import:{module_name}", "failed", error=f"{module_name} smoke test failed: {error_text(exc)}")
        return
    info["seconds"] = round(time.perf_counter() - start, 2)
    if ok:
        part(f"import:{module_name}", "passed", **info)
    else:
        part(f"import:{module_name}", "failed", error=f"{module_name} smoke test: wrong numbers", **info)


with tempfile.TemporaryDirectory(prefix="envbuild-ext-") as root:
    if not compile_ops:
        part("cpp_op", "skipped", reason="validate.compile_extensions is false in the lock")
    else:
        cpp_op(root)
        if backend in ("cuda", "rocm"):
            gpu_op(root)
    if backend in ("cuda", "rocm") and "triton" not in [p.replace("-", "_") for p in packages]:
        if importlib.util.find_spec("triton") is not None:
            triton_kernel(root)
        else:
            part("triton_kernel", "skipped", reason="triton is not installed")
    for pkg in packages:
        smoke(pkg.replace("-", "_"))
emit({"parts": parts, "torch_version": torch.__version__})
