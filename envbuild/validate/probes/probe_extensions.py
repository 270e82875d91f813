# mypy: disable-error-code="import-not-found,no-untyped-call"
"""Probe: run custom ops (C++; CUDA/HIP on GPU locks), a Triton kernel, torch.compile, extension imports.

Every part reports ``status`` (passed | failed | skipped), and on failure an ``error`` and a ``hint``.

**The ops built with the image** (``ops``: the lock's ``probe_ops``): the builder stage compiled them
against the image's torch (``_probe_ops.py``) and the final image holds them in ``ops_dir``; they are
imported and run, with no compiler.  Where ``ops_dir`` has no manifest (validate runs in a provider's
environment, not in the image), they are compiled here on first run and cached, as below.
``compile`` (``validate.compile_extensions``) compiles them on arrival as well.  ``torch_compile``
(``validate.torch_compile``) runs a small ``torch.compile`` through Inductor (C++ on the CPU, Triton on
a GPU), with Inductor's cache beside the ops' (``cache_dir``/inductor).

The ops compiled on arrival are cached with torch's own mechanism (``load_inline`` with a
``build_directory``): the validator passes ``cache_dir`` (``$XDG_CACHE_HOME/envbuild/torch-
extensions``), and each op's name holds a hash of everything its build depends on (:func:`build_key`:
torch's version and path, Python's ABI, the compiler's path and ``--version``, the flags and variables
the build reads, the source), so a second run on the same machine loads the library ninja finds up to
date, and any change builds afresh under a new name. The op is still run and its numbers checked every
time. A cache folder that is not this user's alone (or cannot be made) is not used: the build then goes
to a temporary folder, as it does without ``cache_dir``. Each build in the cache holds an flock on
``<name>.flock`` beside it, so two runs never build one op at once, and torch's own lock file, which a
killed build leaves behind, is known to be stale and removed.

With ``cached_only`` (the validator runs the probe in its warm worker, which has imported torch
already) nothing is compiled: an op that is not in the cache makes the probe emit ``needs_build``, and
the validator runs it again in a process of its own, which builds it.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import importlib.util
import os
import shutil
import stat
import sys
import tempfile
import time
from typing import Any

from _probe_common import emit, error_text, read_args

args = read_args()
backend: str = args.get("backend", "cpu")
compile_ops: bool = bool(args.get("compile", True))
image_ops: list[str] = [str(k) for k in args.get("ops", [])]
ops_dir: str = str(args.get("ops_dir", ""))
run_torch_compile: bool = bool(args.get("torch_compile", False))
packages: list[str] = list(args.get("extensions", []))
cache_arg: str | None = args.get("cache_dir")
# In the warm worker (the run's torch process): use only ops already in the cache; emit needs_build
# instead of compiling, and the validator runs this probe in a process of its own.
cached_only: bool = bool(args.get("cached_only", False))
parts: list[dict[str, Any]] = []
REBUILD = "rebuild the image from its bundle (envbuild build)"

import torch  # noqa: E402
from _extension_build import TRITON_SOURCE, build_cause, build_key, toolchain_missing  # noqa: E402
from _probe_ops import NotBuilt, NotUsable, gpu_compiler, load_prebuilt, op_sources, read_manifest  # noqa: E402


def cache_folder() -> tuple[str | None, str]:
    """(the folder cached builds go in, "") or (None, why there is none)."""
    if not cache_arg:
        return None, "no cache folder given"
    try:
        os.makedirs(cache_arg, mode=0o700, exist_ok=True)
        st = os.lstat(cache_arg)
    except OSError as exc:
        return None, f"{cache_arg}: {exc.strerror or exc}"
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        return None, f"{cache_arg}: not a folder of this user's alone"
    return cache_arg, ""


class NeedsBuild(Exception):
    """``cached_only``: an op is not in the cache (or its cached build does not load): build it in a
    process of its own instead (see stage_runners._extensions)."""


def load_op(kind: str, build_root: str, compiler: str, **sources: Any) -> tuple[Any, dict[str, Any]]:
    """Build (or load from the cache) the op; the module and how the cache was used."""
    from torch.utils.cpp_extension import load_inline

    texts = [str(v) for _, v in sorted(sources.items())]
    name = f"envbuild_probe_{kind}_{build_key(kind, compiler, texts)}"
    folder, why = cache_folder()
    if folder is None:
        if cached_only:
            raise NeedsBuild(f"no extension cache ({why})")
        build = os.path.join(build_root, kind)
        os.makedirs(build)
        info: dict[str, Any] = {"cache": "off", "cache_note": why}
        return load_inline(name=name, build_directory=build, verbose=False, **sources), info
    build = os.path.join(folder, name)
    library = os.path.join(build, f"{name}.so")
    if cached_only and not os.path.exists(library):
        raise NeedsBuild(f"the {kind} op is not built yet")
    with open(os.path.join(folder, f"{name}.flock"), "a") as held:
        try:  # another validation building the same op: wait for it (cached_only: build elsewhere)
            fcntl.flock(held, fcntl.LOCK_EX | (fcntl.LOCK_NB if cached_only else 0))
        except BlockingIOError:
            raise NeedsBuild(f"the {kind} op is being built by another run") from None
        # Every build in the cache holds this lock, so torch's own lock file in the build folder is
        # stale: left by a build that was killed, it would make every later load wait forever.
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(build, "lock"))
        os.makedirs(build, mode=0o700, exist_ok=True)
        hit = os.path.exists(library)
        info = {"cache": "hit" if hit else "miss", "build_directory": build}
        try:
            return load_inline(name=name, build_directory=build, verbose=False, **sources), info
        except Exception:
            if not hit:
                raise
            if cached_only:
                raise NeedsBuild(f"the cached {kind} op does not load") from None
        # A cached build that does not load (damaged, half-written): build it again, once.
        shutil.rmtree(build, ignore_errors=True)
        os.makedirs(build, mode=0o700)
        info["cache"] = "rebuilt"
        return load_inline(name=name, build_directory=build, verbose=False, **sources), info


def part(name: str, status: str, **info: Any) -> None:
    parts.append({"name": name, "status": status, **info})


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


def op_name(kind: str) -> str:
    return "cpp_op" if kind == "cpp" else f"{kind}_op"


def run_op(kind: str, mod: Any, start: float, name: str, **info: Any) -> None:
    if kind == "cpp":
        x = torch.randn(4096)
        check_numbers(name, mod.axpb(x, 2.5, 0.5), x, start, **info)
        return
    x = torch.randn(1 << 20, device="cuda")
    y = mod.axpb_gpu(x, 2.5, 0.5)
    torch.cuda.synchronize()
    check_numbers(name, y, x, start, **info)


def image_op(kind: str, manifest: dict[str, Any]) -> None:
    """Import and run the op the image's builder stage compiled: no compiler needed."""
    start = time.perf_counter()
    try:
        mod, info = load_prebuilt(ops_dir, manifest, kind)
    except NotBuilt as exc:
        part(op_name(kind), "skipped", reason=str(exc))
        return
    except NotUsable as exc:
        part(op_name(kind), "failed", error=str(exc), hint=REBUILD)
        return
    except Exception as exc:
        part(op_name(kind), "failed", error=f"the image's {kind} op does not load: {error_text(exc)}")
        return
    try:
        run_op(kind, mod, start, op_name(kind), **info)
    except Exception as exc:
        part(op_name(kind), "failed", error=f"the image's {kind} op failed: {error_text(exc)}", **info)


def compiled_op(kind: str, build_root: str, name: str, note: str) -> None:
    """Compile the op here (cached: see load_op) and run it."""
    extra = {"note": note} if note else {}
    if kind == "cpp":
        missing = toolchain_missing()
        if missing:
            part(
                name,
                "failed",
                error="cannot compile a C++ extension: missing " + ", ".join(missing),
                hint="install the toolchain (apt: g++ python3-dev ninja-build), validate in the image built "
                "from the bundle (its op is built there), or set validate.probe_ops = false",
                **extra,
            )
            return
        cxx = os.environ.get("CXX", "c++")
        compiler = shutil.which(cxx) or cxx
    else:
        found = gpu_compiler(kind)
        if not found:
            tool = "hipcc" if kind == "rocm" else "nvcc"
            part(
                name,
                "failed",
                error=f"cannot compile a {kind.upper()} extension: {tool} not found on PATH",
                hint="use a -devel base image (nvidia/cuda:*-devel, rocm/dev-*-complete), validate in the "
                "image built from the bundle, or set validate.probe_ops = false",
                **extra,
            )
            return
        compiler = found
    start = time.perf_counter()
    try:
        mod, cache = load_op(kind, build_root, compiler, **op_sources(kind))
        run_op(kind, mod, start, name, compiler=compiler, source="compiled here", **cache, **extra)
    except NeedsBuild:
        raise
    except Exception as exc:
        part(
            name,
            "failed",
            error=f"{'C++' if kind == 'cpp' else kind.upper()} extension failed: {build_cause(exc)}",
            hint="the compiler output is in the part's detail",
            detail=str(exc)[-1500:],
            **extra,
        )


def ops(root: str) -> None:
    """The image's ops where it has them, else compiled here; with ``compile``, compiled here too."""
    gpu = [backend] if backend in ("cuda", "rocm") else []
    kinds = [k for k in ("cpp", *gpu) if k in image_ops or compile_ops]
    if not kinds:
        why = "validate.probe_ops and validate.compile_extensions are false in the lock"
        part("cpp_op", "skipped", reason=why)
        return
    manifest: dict[str, Any] | None = None
    note = ""
    if image_ops:
        try:
            manifest = read_manifest(ops_dir)
        except NotUsable as exc:
            part("probe_ops", "failed", error=str(exc), hint=REBUILD)
            return
        if manifest is None:
            note = f"no ops built with the image in {ops_dir} (not the image built from this bundle)"
    for kind in kinds:
        if kind in image_ops and manifest is not None:
            image_op(kind, manifest)
            if compile_ops:
                compiled_op(kind, root, f"{op_name(kind)}_compiled", "")
        else:
            compiled_op(kind, root, op_name(kind), note)


def torch_compile_part() -> None:
    """A small function through torch.compile's default backend (Inductor): C++ on the CPU, Triton on
    a GPU; its numbers checked against eager."""
    if cache_arg:
        os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(cache_arg, "inductor"))
    gpu = backend in ("cuda", "rocm") and torch.cuda.is_available()
    start = time.perf_counter()
    try:
        fn = torch.compile(lambda t: 2.5 * t + 0.5, fullgraph=True)
        x = torch.randn(4096, device="cuda" if gpu else "cpu")
        y = fn(x)
        if gpu:
            torch.cuda.synchronize()
        check_numbers("torch_compile", y, x, start, device=str(x.device))
    except Exception as exc:
        part(
            "torch_compile",
            "failed",
            error=f"torch.compile failed: {build_cause(exc)}",
            hint="torch.compile needs a C compiler at run time (Inductor's C++ on the CPU, Triton's launcher "
            "on a GPU): validate.torch_compile = true keeps g++ and Python's headers in the image",
            detail=str(exc)[-1500:],
        )


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


def run_parts(root: str) -> None:
    ops(root)
    if run_torch_compile:
        torch_compile_part()
    if backend in ("cuda", "rocm") and "triton" not in [p.replace("-", "_") for p in packages]:
        if importlib.util.find_spec("triton") is not None:
            triton_kernel(root)
        else:
            part("triton_kernel", "skipped", reason="triton is not installed")
    for pkg in packages:
        smoke(pkg.replace("-", "_"))


with tempfile.TemporaryDirectory(prefix="envbuild-ext-") as root:
    try:
        run_parts(root)
    except NeedsBuild as exc:
        emit({"needs_build": str(exc), "torch_version": torch.__version__})
    else:
        emit({"parts": parts, "torch_version": torch.__version__})
