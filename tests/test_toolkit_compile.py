"""CUDA 13's compiler from the package index compiles and links in the layout the builder stage creates
(issue 35 item 1), with no GPU and no nvidia/cuda image.

The built-in ``pytorch`` profile (torch 2.14.1, CUDA 13.0, H100) is rendered and locked against the
package index (pypi.org: torch requires ``cuda-toolkit[...]==13.0.3``); its ``requirements-toolkit.txt``
is installed as the Dockerfile installs it (``pip install --no-deps --require-hashes --target``: nvcc, crt,
nvvm, cudart, CCCL, about 105 MB from the index), into a temporary folder standing for the builder's
prefix.  A plain ``.cu`` kernel (torch's headers would make nvcc take minutes) is then compiled for sm_90
with that prefix's nvcc and linked as torch's cpp_extension links an op (``c++ -shared ... -L
CUDA_HOME/lib -lcudart``), under the variables the Dockerfile sets on the probe op's ``RUN`` line: it links
through the linker script only, records NEEDED libcudart.so.13, and loads against the runtime wheel's
library.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from build_support import envbuild

from envbuild.plan import check
from envbuild.profile import load_profile
from envbuild.render.source_build import toolkit_view

KERNEL = """\
#include <cuda_runtime.h>

__global__ void add_one(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}

extern "C" int envbuild_launch(float* x, int n) {
    add_one<<<(n + 255) / 256, 256>>>(x, n);
    return (int)cudaGetLastError();
}
"""


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=600, check=False)


@pytest.mark.slow
def test_the_locked_toolkit_wheels_compile_and_link_in_the_builders_layout(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    for args in (("render", "pytorch", "--target", "h100", "--out", bundle), ("lock", bundle)):
        proc = (
            envbuild(*args, "--index-url", "https://pypi.org/simple")
            if args[0] == "lock"
            else envbuild(*args)
        )
        assert proc.returncode == 0, f"{args[0]}: {proc.stdout}{proc.stderr}"
    view = toolkit_view(check(load_profile("pytorch"), targets=["h100"]).plan)
    assert view is not None
    dockerfile = (bundle / "Dockerfile").read_text()
    # the layout below is the Dockerfile's: its prefix, its linker script, its variables on the op's RUN line
    assert f"--target {view.prefix} -r /tmp/envbuild/{view.requirements}" in dockerfile
    assert f"echo 'INPUT({view.cudart})' > {view.link}/libcudart.so" in dockerfile
    (probe_run,) = [line for line in dockerfile.splitlines() if "envbuild-probe-ops.py build" in line]
    assert probe_run.startswith("RUN " + " ".join(f"{k}={v}" for k, v in view.env))

    prefix = tmp_path / "opt-envbuild-cuda"  # stands for view.prefix

    def here(value: str) -> str:
        value = value.replace(view.prefix, str(prefix)).replace("$PATH", os.environ.get("PATH", ""))
        return value.strip('"')  # the shell's quoting

    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    install = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--require-hashes"]
    proc = _run([*install, "--target", str(prefix), "-r", str(bundle / view.requirements)], env, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    home = Path(here(view.home))
    for tool in ("bin/nvcc", "bin/ptxas", "nvvm/bin/cicc"):  # pip keeps the wheels' executable bits
        assert os.access(home / tool, os.X_OK), tool
    assert (home / "lib" / view.cudart).is_file() and not (home / "lib" / "libcudart.so").exists()
    link = Path(here(view.link))
    link.mkdir(parents=True)
    (link / "libcudart.so").write_text(f"INPUT({view.cudart})\n")

    build = {**env, **{key: here(value) for key, value in view.env}}
    (tmp_path / "k.cu").write_text(KERNEL)
    compile_ = [str(home / "bin" / "nvcc"), "-gencode", "arch=compute_90,code=sm_90", "-Xcompiler", "-fPIC"]
    proc = _run([*compile_, "-c", "k.cu", "-o", "k.o"], build, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # linked as cpp_extension links an op: -L CUDA_HOME/lib (lib64 is absent) -lcudart
    linking = ["c++", "-shared", "k.o", f"-L{home / 'lib'}", "-lcudart", "-o", "k.so"]
    without = {**build, "LIBRARY_PATH": str(home / "lib")}  # the linker script's folder left out
    proc = _run(linking, without, tmp_path)
    assert proc.returncode != 0 and "-lcudart" in proc.stderr, proc.stderr
    proc = _run(linking, build, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    dynamic = _run(["readelf", "-d", "k.so"], env, tmp_path).stdout
    assert re.findall(r"NEEDED.*\[(libcudart[^]]*)\]", dynamic) == [view.cudart], dynamic
    # the module loads against the runtime wheel's library (in the image: the venv's, which torch loads)
    load = (
        "import ctypes, sys; ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL); "
        "print(bool(ctypes.CDLL(sys.argv[2]).envbuild_launch))"
    )
    proc = _run([sys.executable, "-c", load, str(home / "lib" / view.cudart), "./k.so"], env, tmp_path)
    assert proc.stdout.strip() == "True", proc.stderr
