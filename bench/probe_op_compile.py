"""Time the compile of the validator's CUDA probe op (``_probe_ops.op_sources("cuda")``), object by object.

The builder stage of a CUDA image compiles this op with torch's ``load_inline`` for the ordered cards'
archs; nvcc's time on a ``.cu`` that includes torch's headers is minutes (one front-end pass per arch),
on a kernel-only ``.cu`` seconds.  This runs torch's own ninja build of the op's sources with the local
nvcc (``$CUDA_HOME``, default /usr/local/cuda) and prints each object's wall time from ``.ninja_log``,
with the machine's load.  With a CPU torch the final link fails (no libc10_cuda): the objects are what
is timed, and the link is not.

    .venv/bin/python bench/probe_op_compile.py [--archs '9.0;10.0+PTX'] [--jobs 1] [--source FILE.py]
        [--torch-include DIR]

A CPU torch's headers lack ``c10/cuda/impl/cuda_cmake_macros.h``: ``--torch-include`` names the
``torch/include`` folder of a CUDA torch wheel (unpacked), searched before the installed torch's.

``--source`` takes another ``_probe_ops.py`` (e.g. ``git show REV:envbuild/validate/probes/_probe_ops.py``
saved to a file) to compare two versions in the same conditions.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT = REPO / "envbuild" / "validate" / "probes" / "_probe_ops.py"


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archs", default="9.0;10.0+PTX", help="TORCH_CUDA_ARCH_LIST (h100 + b200)")
    parser.add_argument("--jobs", default="1", help="MAX_JOBS for ninja (1: objects one after another)")
    parser.add_argument("--source", type=Path, default=DEFAULT, help="the _probe_ops.py to time")
    parser.add_argument("--torch-include", type=Path, help="a CUDA torch wheel's torch/include folder")
    args = parser.parse_args()
    spec = importlib.util.spec_from_file_location("probe_ops_under_test", args.source)
    assert spec is not None and spec.loader is not None
    ops = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ops)
    os.environ["TORCH_CUDA_ARCH_LIST"] = args.archs
    os.environ["MAX_JOBS"] = args.jobs
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    import torch.utils.cpp_extension as cpp_extension
    from torch.utils.cpp_extension import load_inline

    if cpp_extension.CUDA_HOME is None:  # a CPU torch looks for no toolkit: point it at the local nvcc's
        cpp_extension.CUDA_HOME = os.environ["CUDA_HOME"]

    where = Path(tempfile.mkdtemp(prefix="envbuild-probe-op-bench-"))
    print(f"probe op compile: {args.source} archs {args.archs} jobs {args.jobs} (load {load()})", flush=True)
    started = time.monotonic()
    detail = ""
    try:
        extra = [str(args.torch_include), str(args.torch_include / "torch/csrc/api/include")]
        load_inline(
            name="envbuild_probe_bench",
            build_directory=str(where),
            extra_include_paths=extra if args.torch_include else None,
            **ops.op_sources("cuda"),
        )
        outcome = "built and loaded"
    except Exception as exc:  # a CPU torch: the link (or the import) fails after the objects
        outcome = f"not linked ({type(exc).__name__})"
        detail = str(exc)
    total = time.monotonic() - started
    log = where / ".ninja_log"
    rows = [line.split("\t") for line in log.read_text().splitlines()[1:]] if log.exists() else []
    for start_ms, end_ms, _, output, _ in rows:
        print(f"probe op compile:   {(int(end_ms) - int(start_ms)) / 1000:7.1f} s  {output}", flush=True)
    objects = {r[3] for r in rows if r[3].endswith(".o")}
    if objects != {"main.o", "cuda.cuda.o"}:
        print(f"probe op compile: objects {sorted(objects)}, not main.o and cuda.cuda.o:", file=sys.stderr)
        print(detail[-4000:], file=sys.stderr)
        return 1
    print(f"probe op compile: total {total:.1f} s, {outcome} (load {load()})", flush=True)
    shutil.rmtree(where, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
