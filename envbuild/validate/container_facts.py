"""The ``container`` stage's facts (:mod:`envbuild.validate.container` decides on them).

Facts are read by the validator's own process, which runs as the image's user (uid 10001) with the
container's limits, like the job will: the size of ``/dev/shm``; every device node the backend needs
(``/dev/nvidiactl``, ``/dev/nvidia-uvm``, ``/dev/nvidiaN``; ``/dev/kfd``, ``/dev/dri/renderD*``)
opened for reading and writing; the memlock, nofile and stack limits; the cgroup (v1 or v2) memory
and CPU limits, and whether this process runs in a container (:func:`in_container`).
"""

from __future__ import annotations

import errno
import os
import re
import resource
import stat
from pathlib import Path
from typing import Any

from envbuild.models import Lock

UNLIMITED_FROM = 1 << 60  # cgroup v1 writes "no limit" as 9223372036854771712 (page-rounded 2^63-1)

NVIDIA_FIXED_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm")
NVIDIA_GPU = re.compile(r"^nvidia\d+$")
RENDER_NODE = re.compile(r"^renderD\d+$")


# -- facts --------------------------------------------------------------------------------------------


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def needed_nodes(backend: str, root: Path = Path("/")) -> list[str]:
    """The device nodes the backend needs, as container paths (existing GPU nodes are globbed)."""
    dev = root / "dev"
    if backend == "cuda":
        try:
            gpus = sorted((p.name for p in dev.iterdir() if NVIDIA_GPU.match(p.name)), key=_number)
        except OSError:
            gpus = []
        return [*NVIDIA_FIXED_NODES, *(f"/dev/{n}" for n in gpus)]
    if backend == "rocm":
        try:
            render = sorted(
                (p.name for p in (dev / "dri").iterdir() if RENDER_NODE.match(p.name)), key=_number
            )
        except OSError:
            render = []
        return ["/dev/kfd", *(f"/dev/dri/{n}" for n in render)]
    return []


def _number(name: str) -> int:
    digits = re.sub(r"\D", "", name)
    return int(digits) if digits else -1


def node_facts(path: str, root: Path = Path("/")) -> dict[str, Any]:
    """One device node: present, a character device, its mode and owner, and whether this process can
    open it for reading and writing (an open, closed at once, so the device cgroup is consulted too)."""
    real = root / path.lstrip("/")
    out: dict[str, Any] = {"path": path}
    try:
        st = os.stat(real)
    except OSError as exc:
        return {**out, "exists": False, "error": errno.errorcode.get(exc.errno or 0, str(exc))}
    out.update(
        exists=True,
        char_device=stat.S_ISCHR(st.st_mode),
        mode=f"{stat.S_IMODE(st.st_mode):04o}",
        uid=st.st_uid,
        gid=st.st_gid,
    )
    try:
        fd = os.open(real, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        code = errno.errorcode.get(exc.errno or 0, "")
        return {**out, "open": "refused", "errno": code, "error": f"{code}: {exc.strerror}"}
    os.close(fd)
    return {**out, "open": "ok"}


def _limit(value: int) -> int | None:
    return None if value == resource.RLIM_INFINITY else int(value)


def rlimit_facts() -> dict[str, Any]:
    """Soft and hard limits; None is unlimited."""
    out: dict[str, Any] = {}
    for name, which in (
        ("memlock", resource.RLIMIT_MEMLOCK),
        ("nofile", resource.RLIMIT_NOFILE),
        ("stack", resource.RLIMIT_STACK),
    ):
        soft, hard = resource.getrlimit(which)
        out[name] = {"soft": _limit(soft), "hard": _limit(hard)}
    return out


def shm_bytes(root: Path = Path("/")) -> int | None:
    try:
        st = os.statvfs(root / "dev" / "shm")
    except OSError:
        return None
    return st.f_blocks * st.f_frsize


def parse_cpuset(text: str) -> int:
    """How many CPUs a cpuset list names (``0-3,8,10-11`` -> 7)."""
    count = 0
    for part in text.replace("\n", ",").split(","):
        part = part.strip()
        if not part:
            continue
        low, _, high = part.partition("-")
        count += (int(high) - int(low) + 1) if high else 1
    return count


def _own_cgroups(root: Path) -> dict[str, str]:
    """``/proc/self/cgroup``: controller (``""`` for v2's unified line) -> path."""
    out: dict[str, str] = {}
    for line in (_read(root / "proc" / "self" / "cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for ctrl in parts[1].split(",") if parts[1] else [""]:
            out[ctrl] = parts[2]
    return out


def _v2_dirs(base: Path, path: str) -> list[Path]:
    """The process's cgroup folder and its ancestors up to the mount, those that are visible.

    With a private cgroup namespace (Docker on cgroup v2) the path is ``/`` and the mount is the
    container's own cgroup; with the host's namespace the path names the folder under the mount.
    """
    dirs: list[Path] = []
    rel = [p for p in path.split("/") if p and p != ".."]
    for depth in range(len(rel), -1, -1):
        folder = base.joinpath(*rel[:depth])
        if folder.is_dir():
            dirs.append(folder)
    return dirs


def _v1_dir(base: Path, controller: str, own: dict[str, str]) -> Path | None:
    """A v1 controller's folder for this process: under the mount at its path, or the mount itself
    (Docker mounts the container's own cgroup there, while /proc/self/cgroup shows the host's path)."""
    for name in (controller, f"{controller},cpuacct", f"cpuacct,{controller}"):
        mount = base / name
        if mount.is_dir():
            rel = [p for p in own.get(controller, "/").split("/") if p and p != ".."]
            deep = mount.joinpath(*rel)
            return deep if rel and deep.is_dir() else mount
    return None


def cgroup_facts(root: Path = Path("/")) -> dict[str, Any]:
    """The memory and CPU limits of this process's cgroup, v1 or v2 (None: no limit, or unknown).

    ``files`` names what was read, relative to ``root``, for the report.
    """
    base = root / "sys" / "fs" / "cgroup"
    own = _own_cgroups(root)
    files: dict[str, str] = {}

    def take(path: Path) -> str | None:
        text = _read(path)
        if text is not None:
            files["/" + str(path.relative_to(root))] = text.splitlines()[0][:200] if text else ""
        return text

    memory: int | None = None
    cpu: float | None = None
    cpuset: int | None = None
    if (base / "cgroup.controllers").is_file():
        version: int | None = 2
        for folder in _v2_dirs(base, own.get("", "/")):  # the tightest limit on the way up counts
            raw = take(folder / "memory.max")
            if raw and raw != "max" and raw.isdigit():
                memory = int(raw) if memory is None else min(memory, int(raw))
            raw = take(folder / "cpu.max")
            if raw:
                quota, _, period = raw.partition(" ")
                if quota != "max" and quota.isdigit() and period.isdigit() and int(period) > 0:
                    cores = int(quota) / int(period)
                    cpu = cores if cpu is None else min(cpu, cores)
            if cpuset is None:
                raw = take(folder / "cpuset.cpus.effective")
                if raw:
                    cpuset = parse_cpuset(raw)
    elif base.is_dir() and any((base / n).is_dir() for n in ("memory", "cpu", "cpu,cpuacct", "cpuset")):
        version = 1
        v1 = _v1_dir(base, "memory", own)
        if v1 is not None:
            folder = v1
            raw = take(folder / "memory.limit_in_bytes")
            if raw and raw.isdigit() and int(raw) < UNLIMITED_FROM:
                memory = int(raw)
            stat_text = _read(folder / "memory.stat") or ""  # long: not copied into the facts
            match = re.search(r"^hierarchical_memory_limit (\d+)$", stat_text, re.M)
            if match and int(match.group(1)) < UNLIMITED_FROM:
                memory = int(match.group(1)) if memory is None else min(memory, int(match.group(1)))
        v1 = _v1_dir(base, "cpu", own)
        if v1 is not None:
            folder = v1
            quota_text, period_text = take(folder / "cpu.cfs_quota_us"), take(folder / "cpu.cfs_period_us")
            if (
                quota_text
                and period_text
                and period_text.isdigit()
                and int(period_text) > 0
                and quota_text.lstrip("-").isdigit()
                and int(quota_text) > 0
            ):
                cpu = int(quota_text) / int(period_text)
        v1 = _v1_dir(base, "cpuset", own)
        if v1 is not None:
            folder = v1
            raw = take(folder / "cpuset.effective_cpus") or take(folder / "cpuset.cpus")
            if raw:
                cpuset = parse_cpuset(raw)
    else:
        version = None
    return {
        "version": version,
        "memory_limit_bytes": memory,
        "cpu_quota_cores": cpu,
        "cpuset_cpus": cpuset,
        "files": files,
    }


def in_container(root: Path = Path("/")) -> bool:
    """Whether this process runs in a container: Docker's ``/.dockerenv``, Podman's
    ``/run/.containerenv``, or a container runtime named in PID 1's cgroup (v1)."""
    if (root / ".dockerenv").exists() or (root / "run" / ".containerenv").exists():
        return True
    cgroup = _read(root / "proc" / "1" / "cgroup") or ""
    return any(word in cgroup for word in ("docker", "kubepods", "containerd", "libpod", "lxc"))


def collect(lock: Lock, root: Path = Path("/")) -> dict[str, Any]:
    """Every fact the stage decides on, read by this process (live when ``root`` is ``/``)."""
    live = root == Path("/")
    facts: dict[str, Any] = {
        "uid": os.getuid(),
        "gid": os.getgid(),
        "groups": sorted(set(os.getgroups())),
        "shm_bytes": shm_bytes(root),
        "nodes": [node_facts(p, root) for p in needed_nodes(lock.backend, root)],
        "rlimits": rlimit_facts(),
        "cgroup": cgroup_facts(root),
        "in_container": in_container(root),
    }
    if live and hasattr(os, "sched_getaffinity"):
        facts["affinity_cpus"] = len(os.sched_getaffinity(0))
    return facts
