# mypy: disable-error-code="import-not-found,no-untyped-call"
"""The validator's probe ops: their sources, their build in the image's builder stage, and loading them.

The ops are tiny ``torch.utils.cpp_extension`` modules: ``axpb`` (C++, on the CPU) and ``axpb_gpu`` (a
CUDA kernel; hipified by torch on ROCm).  They prove that code compiled against the environment's torch
loads and computes right numbers, which is what a user's own extensions (flash-attn, ...) need.

**Built with the image** (issue 27 item 5).  The bundle carries this file as ``envbuild-probe-ops.py``;
the builder stage runs it with the venv's Python after the locked torch is installed::

    python envbuild-probe-ops.py build /opt/envbuild-probe-ops --gpu cuda --require-gpu

It compiles each op with torch's own ``load_inline`` (ninja, the builder's compiler, the arch list the
Dockerfile sets: the ordered cards' only), copies each module to the folder and writes ``ops.json``:
torch's version, Python's, the arch list, and each module's file and sha256.  The final stage copies
the folder, not the compiler.  Nothing timed or random goes into it, and the build folder is fixed
(``__FILE__`` lands in the module), so two builds of one bundle give the same bytes.

**On arrival** :func:`load_prebuilt` checks the folder against the running torch (a venv changed after
the build gets "built against torch A, this environment has B") and each module's sha256, then imports
it with importlib: no compiler is needed.

Standard library and torch only: the probes import it beside them (``_extension_build.py``), and the
builder stage runs it on its own.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from typing import Any

FORMAT = "envbuild.probe-ops/1"
MANIFEST = "ops.json"
BUILD_ROOT = "/tmp/envbuild/probe-ops-build"  # fixed: the path is compiled into the module (__FILE__)
ARCH_VARIABLES = ("TORCH_CUDA_ARCH_LIST", "PYTORCH_ROCM_ARCH")

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

# The GPU op in two files, as a user's extension should be: nvcc compiles the kernel and a launcher that
# takes raw pointers, the size and the stream, with CUDA's runtime header only (nvcc parses a file once
# per arch; with torch's headers that is minutes per arch, without them seconds), and the host compiler
# compiles the tensor side once: the checks, the device guard, torch's current stream, the launch check
# ("no kernel image is available" raises there, not as wrong numbers) and, by load_inline, the binding.
# load_inline puts <torch/types.h> at the top of the .cu unless told not to (no_implicit_headers, torch
# 2.8 on): op_sources tells it where the running torch knows the argument.
CUDA_SOURCE = r"""
#include <cuda_runtime.h>
#include <cstdint>
__global__ void axpb_kernel(const float* x, float* y, float a, float b, int64_t n) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + b;
}
void axpb_launch(const float* x, float* y, float a, float b, int64_t n, cudaStream_t stream) {
  const int threads = 256;
  const unsigned int blocks = (unsigned int)((n + threads - 1) / threads);
  axpb_kernel<<<blocks, threads, 0, stream>>>(x, y, a, b, n);
}
"""
CUDA_HOST_SOURCE = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
void axpb_launch(const float* x, float* y, float a, float b, int64_t n, cudaStream_t stream);
torch::Tensor axpb_gpu(torch::Tensor x, double a, double b) {
  TORCH_CHECK(x.is_cuda(), "axpb_gpu: x must be on a GPU, got ", x.device());
  TORCH_CHECK(x.scalar_type() == torch::kFloat, "axpb_gpu: x must be float32, got ", x.scalar_type());
  const c10::cuda::CUDAGuard guard(x.device());  // launch on x's device, not the current one
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  const int64_t n = xc.numel();
  if (n == 0) return y;  // a grid of 0 blocks is an invalid launch
  axpb_launch(xc.data_ptr<float>(), y.data_ptr<float>(), (float)a, (float)b, n,
              c10::cuda::getCurrentCUDAStream());
  C10_CUDA_CHECK(cudaGetLastError());  // "no kernel image is available" raises here, not as wrong numbers
  return y;
}
"""
# ROCm keeps the op in one file, compiled by hipcc after torch hipifies it: torch's JIT build passes the
# HIP platform macros to hipcc only, and the host compiler cannot include the hipified c10 headers.
ROCM_SOURCE = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
__global__ void axpb_kernel(const float* x, float* y, float a, float b, int64_t n) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + b;
}
torch::Tensor axpb_gpu(torch::Tensor x, double a, double b) {
  TORCH_CHECK(x.is_cuda(), "axpb_gpu: x must be on a GPU, got ", x.device());
  TORCH_CHECK(x.scalar_type() == torch::kFloat, "axpb_gpu: x must be float32, got ", x.scalar_type());
  const c10::cuda::CUDAGuard guard(x.device());  // launch on x's device, not the current one
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  const int64_t n = xc.numel();
  if (n == 0) return y;  // a grid of 0 blocks is an invalid launch
  const int threads = 256;
  const unsigned int blocks = (unsigned int)((n + threads - 1) / threads);
  axpb_kernel<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      xc.data_ptr<float>(), y.data_ptr<float>(), (float)a, (float)b, n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();  // "no kernel image is available" raises here, not as wrong numbers
  return y;
}
"""
ROCM_DECL = "torch::Tensor axpb_gpu(torch::Tensor x, double a, double b);"


def op_sources(kind: str) -> dict[str, Any]:
    """``load_inline``'s source arguments for op ``kind`` ("cpp", "cuda" or "rocm")."""
    if kind == "cpp":
        return {"cpp_sources": CPP_SOURCE, "functions": ["axpb"]}
    if kind == "cuda":
        sources: dict[str, Any] = {"cpp_sources": CUDA_HOST_SOURCE, "cuda_sources": CUDA_SOURCE}
        sources["functions"] = ["axpb_gpu"]
        if _load_inline_takes("no_implicit_headers"):  # else the .cu includes torch's headers after all
            sources["no_implicit_headers"] = True
        return sources
    return {"cpp_sources": ROCM_DECL, "cuda_sources": ROCM_SOURCE, "functions": ["axpb_gpu"]}


def _load_inline_takes(argument: str) -> bool:
    """Whether this torch's ``load_inline`` has the keyword ``argument``, read from its source rather than
    imported: importing ``torch.utils.cpp_extension`` imports setuptools, whose distutils hack asserts
    when the standard library's distutils was loaded first (a test worker that ran other tests)."""
    if importlib.util.find_spec("torch") is None:
        return False
    spec = importlib.util.find_spec("torch.utils.cpp_extension")
    if spec is None or spec.origin is None:
        return False
    with open(spec.origin, encoding="utf-8") as source:
        tree = ast.parse(source.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "load_inline":
            args = node.args
            return argument in {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    return False


def gpu_compiler(kind: str) -> str | None:
    """nvcc / hipcc where torch.utils.cpp_extension looks: PATH, then $CUDA_HOME / $ROCM_HOME, then the
    default install prefix."""
    name = "hipcc" if kind == "rocm" else "nvcc"
    home = os.environ.get("ROCM_HOME" if kind == "rocm" else "CUDA_HOME") or (
        "/opt/rocm" if kind == "rocm" else "/usr/local/cuda"
    )
    return shutil.which(name) or shutil.which(os.path.join(home, "bin", name))


def _first_line(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({type(exc).__name__})"
    lines = [s.strip() for s in (out.stdout or out.stderr).splitlines() if s.strip()]
    if not lines:
        return "unknown"
    return lines[-1] if argv[0].endswith("nvcc") else lines[0]  # nvcc's last line names the release


def sha256_of(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def module_name(kind: str) -> str:
    return f"envbuild_probe_{kind}_image"


def torch_identity() -> dict[str, str]:
    import torch

    return {"torch": torch.__version__, "torch_git": str(getattr(torch.version, "git_version", ""))}


def build(folder: str, gpu: str | None, require_gpu: bool) -> dict[str, Any]:
    """Compile the ops into ``folder`` and write its manifest; returns the manifest."""
    from torch.utils.cpp_extension import load_inline

    os.makedirs(folder, exist_ok=True)
    ops: dict[str, dict[str, str]] = {}
    for kind in ["cpp", *([gpu] if gpu else [])]:
        compiler = os.environ.get("CXX", "c++") if kind == "cpp" else gpu_compiler(kind)
        if compiler is None:
            why = f"{'hipcc' if kind == 'rocm' else 'nvcc'} is not in the builder stage's image"
            if require_gpu:
                raise SystemExit(f"envbuild-probe-ops: cannot build the {kind} op: {why}")
            ops[kind] = {"skipped": why}
            print(f"envbuild-probe-ops: {kind} op not built: {why}", flush=True)
            continue
        name = module_name(kind)
        where = os.path.join(BUILD_ROOT, kind)
        shutil.rmtree(where, ignore_errors=True)
        os.makedirs(where)
        started = time.perf_counter()
        built = os.path.join(where, f"{name}.so")
        try:
            load_inline(name=name, build_directory=where, verbose=True, **op_sources(kind))
            loaded = ""
        except (ImportError, OSError) as exc:  # built, but cannot be imported here (no GPU, no driver)
            if not os.path.exists(built):
                raise
            loaded = f"; not imported in the builder ({type(exc).__name__}: {str(exc).splitlines()[0]})"
        shutil.copyfile(built, os.path.join(folder, f"{name}.so"))
        digest = sha256_of(built)
        ops[kind] = {"file": f"{name}.so", "sha256": digest, "compiler": _first_line([compiler, "--version"])}
        seconds = time.perf_counter() - started
        print(f"envbuild-probe-ops: {kind} op built in {seconds:.1f} s (sha256 {digest}){loaded}", flush=True)
    manifest = {
        "format": FORMAT,
        **torch_identity(),
        "python": sys.version.split()[0],
        "ext_suffix": str(sysconfig.get_config_var("EXT_SUFFIX")),
        "archs": {k: os.environ[k] for k in ARCH_VARIABLES if os.environ.get(k)},
        "ops": ops,
    }
    with open(os.path.join(folder, MANIFEST), "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=2, sort_keys=True)
        fh.write("\n")
    shutil.rmtree(BUILD_ROOT, ignore_errors=True)
    return manifest


class NotUsable(Exception):
    """The image's op cannot be used: the message says why, for the report."""


class NotBuilt(NotUsable):
    """The builder stage had no compiler for this op (an explicit base.image without nvcc/hipcc)."""


def read_manifest(folder: str) -> dict[str, Any] | None:
    """The folder's manifest, None when there is none (validate runs outside the image); raises
    :class:`NotUsable` for a manifest that is not ours."""
    path = os.path.join(folder, MANIFEST)
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise NotUsable(f"{path}: cannot be read ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("ops"), dict):
        raise NotUsable(f"{path}: not an envbuild probe-ops manifest of format {FORMAT}")
    return data


def op_path(folder: str, kind: str, entry: dict[str, Any]) -> str:
    """The real path of the ``kind`` op's module: a plain file name in ``folder``, resolving inside it.

    ``ops.json`` is read from the image, so ``"file": "../elsewhere/evil.py"``, an absolute path or a
    symbolic link out of the folder is refused (:class:`NotUsable`), naming the entry: the module is
    imported and run."""
    name = entry.get("file")
    where = f"{os.path.join(folder, MANIFEST)}: ops.{kind}.file {name!r}"
    if (
        not isinstance(name, str)
        or name in ("", ".", "..")
        or "/" in name
        or "\\" in name
        or "\0" in name
        or os.path.isabs(name)
    ):
        raise NotUsable(f"{where} is not a file name in {folder}: refused, nothing was imported")
    home = os.path.realpath(folder)
    real = os.path.realpath(os.path.join(folder, name))
    if os.path.dirname(real) != home:
        raise NotUsable(f"{where} resolves to {real}, outside {home}: refused, nothing was imported")
    return real


def load_prebuilt(folder: str, manifest: dict[str, Any], kind: str) -> tuple[Any, dict[str, Any]]:
    """Import the image's ``kind`` op; (module, facts).  Raises :class:`NotUsable` with the reason."""
    entry = manifest["ops"].get(kind)
    if not isinstance(entry, dict):
        raise NotUsable(f"the image has no {kind} op ({os.path.join(folder, MANIFEST)} does not list it)")
    if "skipped" in entry:
        raise NotBuilt(f"the image's {kind} op was not built: {entry['skipped']}")
    now = torch_identity()
    if (manifest.get("torch"), manifest.get("torch_git")) != (now["torch"], now["torch_git"]):
        raise NotUsable(
            f"the image's {kind} op was built against torch {manifest.get('torch')}, and this environment "
            f"has torch {now['torch']}: the venv changed after the image was built"
        )
    path = op_path(folder, kind, entry)
    try:
        digest = sha256_of(path)
    except OSError as exc:
        raise NotUsable(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if digest != entry.get("sha256"):
        raise NotUsable(f"{path}: sha256 {digest} is not the {entry.get('sha256')} the build recorded")
    spec = importlib.util.spec_from_file_location(module_name(kind), path)
    if spec is None or spec.loader is None:
        raise NotUsable(f"{path}: not a loadable extension module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, {"source": "image", "path": path, "compiler": entry.get("compiler", "")}


def main() -> int:
    parser = argparse.ArgumentParser(description="Build envbuild's probe ops in the image's builder stage.")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="compile the ops into FOLDER and write its ops.json")
    b.add_argument("folder")
    b.add_argument("--gpu", choices=("cuda", "rocm"), help="also build the GPU op with nvcc / hipcc")
    b.add_argument("--require-gpu", action="store_true", help="fail when the GPU compiler is missing")
    args = parser.parse_args()
    build(args.folder, args.gpu, args.require_gpu)
    return 0


if __name__ == "__main__":
    sys.exit(main())
