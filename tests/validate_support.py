"""Locks for the validator tests: a rendered ``pytorch-cpu`` lock fitted to this test venv, and GPU
locks with card figures from envbuild/data/cards.toml."""

from __future__ import annotations

import json
import stat
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from envbuild.boundary import parse, to_data
from envbuild.models import Lock, LockedDistribution, LockedFile, LockTarget

FIXTURES = Path(__file__).resolve().parent / "fixtures"

CARDS = {
    "h100": LockTarget(
        id="h100", name="NVIDIA H100 SXM 80GB", vendor="nvidia", arch="sm_90", memory_gib=80, cards_per_lot=1
    ),
    "h200": LockTarget(
        id="h200",
        name="NVIDIA H200 SXM 141GB",
        vendor="nvidia",
        arch="sm_90",
        memory_gib=141,
        cards_per_lot=1,
    ),
    "b200": LockTarget(
        id="b200", name="NVIDIA B200", vendor="nvidia", arch="sm_100", memory_gib=180, cards_per_lot=2
    ),
    "mi300x": LockTarget(
        id="mi300x", name="AMD Instinct MI300X", vendor="amd", arch="gfx942", memory_gib=192, cards_per_lot=1
    ),
    "a100-40gb": LockTarget(
        id="a100-40gb", name="NVIDIA A100 40GB", vendor="nvidia", arch="sm_80", memory_gib=40, cards_per_lot=1
    ),
}


def _installed(name: str) -> bool:
    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        return False
    return True


def cpu_lock(workdir: Path, **update: Any) -> Lock:
    """``envbuild render``'s lock for the built-in ``pytorch-cpu`` profile, adjusted to this venv:
    the interpreter is this one, the workdir a test folder, and declared packages this venv does not
    carry (numpy) are dropped.  torch==2.13.0+cpu stays declared and must match for real."""
    from envbuild.plan import check
    from envbuild.profile import load_profile
    from envbuild.render import make_lock

    base = make_lock(check(load_profile("pytorch-cpu")).plan)
    packages = tuple(p for p in base.packages if _installed(p.name))
    assert any(p.name == "torch" and p.local == "cpu" for p in packages), base.packages
    fields: dict[str, Any] = {
        "python_executable": sys.executable,
        "packages": packages,
        "workdir": str(workdir),
        **update,
    }
    return parse(Lock, {**to_data(base), **fields})


def gpu_lock(backend: str, targets: list[str], **update: Any) -> Lock:
    """A GPU lock written out in full (no render involved): torch 2.7.1 for CUDA 12.8 or ROCm 6.3."""
    cuda = backend == "cuda"
    fields: dict[str, Any] = {
        "envbuild_version": "0.1.0",
        "profile_name": "pytorch",
        "profile_kind": "pytorch",
        "profile_sha256": "0" * 64,
        "sources": {},
        "os": "ubuntu24.04",
        "os_release_id": "ubuntu",
        "os_release_version": "24.04",
        "base_image": "nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04"
        if cuda
        else "rocm/dev-ubuntu-24.04:6.3-complete",
        "python_version": "3.11",
        "python_executable": "/opt/venv/bin/python",
        "backend": backend,
        "accelerator_version": "12.8" if cuda else "6.3",
        "torch_version": "2.7.1",
        "torch_variant": "cu128" if cuda else "rocm6.3",
        "torch_arch_list": (),
        "required_archs": tuple(CARDS[t].arch for t in targets),
        "min_driver": "570.124.06" if cuda else None,  # cpu/rocm: no NVIDIA minimum
        "targets": tuple(CARDS[t] for t in targets),
        "gpus": 1,
        "gpu_memory_gib": None,
        "packages": (),
        "apt": (),
        "env": {},
        "checks": (),
        "extensions": (),
        "compile_extensions": True,
        "checkpoint_dir": "runs/envbuild-checkpoint",
        **update,
    }
    return parse(Lock, fields)


def locked(
    name: str,
    version: str,
    local: str | None = None,
    *,
    declared_by: tuple[str, ...] = (),
    required_by: tuple[str, ...] = (),
) -> LockedDistribution:
    """One distribution of a resolved lock, with a made-up wheel (the validator never reads files)."""
    tag = f"+{local}" if local else ""
    wheel = f"{name.replace('-', '_')}-{version}{tag}-py3-none-any.whl"
    return LockedDistribution(
        name=name,
        version=version,
        local=local,
        files=(LockedFile(filename=wheel, url=f"https://files.example/{wheel}", sha256="0" * 64),),
        declared_by=declared_by,
        required_by=required_by,
    )


def venv_distributions() -> tuple[LockedDistribution, ...]:
    """This venv's installed set as a resolved lock would hold it (first copy of a name wins, as for
    imports and for the packages probe)."""
    seen: dict[str, LockedDistribution] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if not name:
            continue
        key = canonicalize_name(name)
        if key not in seen:
            public, _, local = dist.version.partition("+")
            seen[key] = locked(key, public, local or None)
    return tuple(seen[k] for k in sorted(seen))


def torch_fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / "torch" / name).read_text(encoding="utf-8"))
    return data


def smi_text(name: str) -> str:
    return (FIXTURES / "smi" / name).read_text(encoding="utf-8")


def fake_tool(folder: Path, name: str, capture: Path, when: str = "") -> Path:
    """``name`` on PATH printing ``capture`` (when its first two arguments are ``when``), else exit 9."""
    folder.mkdir(exist_ok=True)
    tool = folder / name
    test = f'[ "$1 $2" = "{when}" ] && ' if when else ""
    tool.write_text(f"#!/bin/sh\n{test}exec cat {capture}\nexit 9\n", encoding="utf-8")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return folder


def hang_script(tmp_path: Path) -> Path:
    """Starts a grandchild in its process group and a daemon that left it (double fork + setsid, holding
    stdout open), records the three pids, then hangs: everything must die with the probe."""
    script = tmp_path / "hang.py"
    script.write_text(
        "import os, subprocess, sys, time\n"
        "sys.stdin.read()\n"
        "child = subprocess.Popen(['sleep', '300'])\n"
        "r, w = os.pipe()\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        os.execvp('sleep', ['sleep', '301'])\n"
        "    os.write(w, str(pid).encode())\n"
        "    os._exit(0)\n"
        "os.close(w)\n"
        "daemon = int(os.read(r, 64))\n"
        f"open({str(tmp_path / 'pids')!r}, 'w').write(f'{{os.getpid()}} {{child.pid}} {{daemon}}')\n"
        "time.sleep(300)\n",
        encoding="utf-8",
    )
    return script


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"  # a zombie is dead, only not yet reaped by its (re)parent
