"""Stage ``container``: what the container (or machine) lets the job do, before any real work.

Facts are read by the validator's own process, which runs as the image's user (uid 10001) with the
container's limits, like the job will: the size of ``/dev/shm``; every device node the backend needs
(``/dev/nvidiactl``, ``/dev/nvidia-uvm``, ``/dev/nvidiaN``; ``/dev/kfd``, ``/dev/dri/renderD*``)
opened for reading and writing; the memlock, nofile and stack limits; the cgroup (v1 or v2) memory
and CPU limits against the lock's ``resources``.  :func:`decide_container` is pure: every failure
names the ``docker run`` flag that fixes it inside a container (:func:`in_container`), and what to
change on a machine that is not one.

The rules (also used by :mod:`envbuild.runopts` to write the run commands, so the command the
README gives passes these checks):

- ``/dev/shm`` of at least :data:`SHM_MIN_BYTES` (1 GiB).  PyTorch's DataLoader workers hand every
  batch to the main process through shared memory, and NCCL's intra-node transport uses it too
  (pytorch/tutorials#2475: NCCL crashed in ``ncclShmOpen`` under Docker's default, fixed with 2 GB);
  Docker's default is 64 MB, where workers die with "bus error" or "unable to write to file
  </torch_...>" (PyTorch's README, "Using pre-built images": use ``--ipc=host`` or
  ``--shm-size``).  1 GiB is envbuild's own floor (16 times Docker's default, the smallest value
  common guides pass as ``--shm-size=1g``), not a measured figure: a job with large batches and many
  workers needs more, which ``--ipc=host`` or a declared ``resources.memory_gib`` gives.
  The run command gives ``--ipc=host`` (the host's own ``/dev/shm``, which the kernel sizes at half
  the RAM) unless the profile declares ``resources.memory_gib``; then ``--shm-size`` of half of it
  (the kernel's tmpfs default proportion, kept inside the container's own IPC namespace), at least
  1 GiB.
- memlock unlimited for GPU backends: NCCL's InfiniBand/RoCE transport registers (pins) its buffers
  with ``ibv_reg_mr``, which fails under a low ``RLIMIT_MEMLOCK`` (NCCL's troubleshooting guide);
  NGC's containers ask for ``--ulimit memlock=-1 --ulimit stack=67108864``.  A warning, not an error:
  a single-node job without RDMA does not need it.
- nofile of at least :data:`NOFILE_MIN`: torch.multiprocessing's default ``file_descriptor`` sharing
  strategy keeps a descriptor open per shared tensor (PyTorch's multiprocessing notes); a warning,
  for a lock with torch only.
- a cgroup memory limit at least ``resources.memory_gib``; an error naming ``--memory``.  Without
  that need declared, a limit below the shared memory size is a warning (``/dev/shm`` pages are
  charged to the container's memory cgroup).
- CPUs (the cgroup quota, the cpuset and the affinity mask, whichever is smallest) at least
  ``resources.cpus``; an error naming ``--cpus`` / ``--cpuset-cpus``.
"""

from __future__ import annotations

import errno
import math
import os
import re
import resource
import stat
from pathlib import Path
from typing import Any

from envbuild.models import Lock
from envbuild.runopts import shm_size_gib
from envbuild.validate.model import StageResult

GIB = 1 << 30
SHM_MIN_BYTES = GIB
NOFILE_MIN = 65536
NOFILE_FLAG_VALUE = 1048576  # the kernel's default fs.nr_open: the most a hard limit may be
UNLIMITED_FROM = 1 << 60  # cgroup v1 writes "no limit" as 9223372036854771712 (page-rounded 2^63-1)

NVIDIA_FIXED_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm")
_NVIDIA_GPU = re.compile(r"^nvidia\d+$")
_RENDER = re.compile(r"^renderD\d+$")


# -- the run-command rules (shared with envbuild.runopts) --------------------------------------------


def shm_fix(memory_gib: float | None) -> str:
    size = shm_size_gib(memory_gib)
    return f"--shm-size {size}g" if size is not None else "--ipc=host (or --shm-size 8g)"


def device_fix(backend: str) -> str:
    if backend == "rocm":
        return "--device /dev/kfd --device /dev/dri"
    return "--gpus all (with the NVIDIA container toolkit)"


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
            gpus = sorted((p.name for p in dev.iterdir() if _NVIDIA_GPU.match(p.name)), key=_number)
        except OSError:
            gpus = []
        return [*NVIDIA_FIXED_NODES, *(f"/dev/{n}" for n in gpus)]
    if backend == "rocm":
        try:
            render = sorted((p.name for p in (dev / "dri").iterdir() if _RENDER.match(p.name)), key=_number)
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


# -- the decision ------------------------------------------------------------------------------------


def _size(value: int) -> str:
    if value >= GIB:
        return f"{value / GIB:.3g} GiB"
    return f"{value / (1 << 20):.4g} MiB"


def _node_problem(lock: Lock, node: dict[str, Any], uid: int, groups: list[int]) -> tuple[str, str] | None:
    """(error, fix) for a node the running user cannot open for reading and writing."""
    path = node["path"]
    if not node.get("exists"):
        return f"{path} is missing in the container", device_fix(lock.backend)
    if node.get("open") == "ok":
        return None
    code = node.get("errno")
    gid = node.get("gid")
    if code == "EACCES":
        return (
            f"{path} (mode {node.get('mode')}, owner {node.get('uid')}:{gid}) cannot be opened for reading "
            f"and writing by uid {uid} (groups {', '.join(map(str, groups)) or 'none'})",
            f"--group-add {gid}",
        )
    if code == "EPERM":
        return (
            f"{path}: the container's device rules refuse to open it for reading and writing",
            f"--device {path} (with its default permissions rwm, not :r)",
        )
    return (
        f"{path} cannot be opened: {node.get('error')}",
        "check the host's driver (the node exists but the device does not answer)",
    )


def decide_container(lock: Lock, facts: dict[str, Any]) -> StageResult:
    errors: list[str] = []
    fixes: list[str] = []
    warnings: list[str] = []
    # docker run flags only inside a container (facts recorded before this fact existed: assumed so)
    docker = bool(facts.get("in_container", True))

    def fail(error: str, fix: str, bare: str = "ask the provider to fix the machine") -> None:
        if not docker:
            errors.append(f"{error}: {bare}")
            return
        errors.append(f"{error}: run with {fix}")
        if fix not in fixes:
            fixes.append(fix)

    shm = facts.get("shm_bytes")
    if shm is None:
        fail(
            "/dev/shm is not mounted"
            + (" (PyTorch's DataLoader workers need shared memory)" if lock.torch_version else ""),
            shm_fix(lock.memory_gib),
            "mount a tmpfs on /dev/shm",
        )
    elif shm < SHM_MIN_BYTES:
        fail(
            f"/dev/shm holds {_size(shm)}, under {_size(SHM_MIN_BYTES)}"
            + (
                ": DataLoader workers die with 'bus error' once batches outgrow it"
                if lock.torch_version
                else ""
            ),
            shm_fix(lock.memory_gib),
            "enlarge it (mount -o remount,size=8g /dev/shm)",
        )

    uid = int(facts.get("uid", -1))
    groups = [int(g) for g in facts.get("groups", [])]
    nodes: list[dict[str, Any]] = list(facts.get("nodes", []))
    for node in nodes:
        problem = _node_problem(lock, node, uid, groups)
        if problem:
            fail(*problem)
    if lock.backend in ("cuda", "rocm"):
        pattern = _NVIDIA_GPU if lock.backend == "cuda" else _RENDER
        count = sum(1 for n in nodes if n.get("exists") and pattern.match(n["path"].rsplit("/", 1)[-1]))
        what = (
            "NVIDIA GPU node(s) /dev/nvidiaN"
            if lock.backend == "cuda"
            else "render node(s) /dev/dri/renderD*"
        )
        if count < lock.gpus:
            fail(
                f"{count} {what} in the container, but the lock's job uses {lock.gpus} (resources.gpus)",
                device_fix(lock.backend),
            )

    limits = facts.get("rlimits", {})
    memlock = limits.get("memlock", {}).get("soft", None) if "memlock" in limits else None
    if lock.backend in ("cuda", "rocm") and "memlock" in limits and memlock is not None:
        fix = "run with --ulimit memlock=-1" if docker else "raise it with `ulimit -l unlimited`"
        warnings.append(
            f"memlock is limited to {_size(memlock)}: NCCL over InfiniBand/RoCE cannot pin its buffers "
            f"(ibv_reg_mr fails); {fix}"
        )
    nofile = limits.get("nofile", {}).get("soft") if "nofile" in limits else None
    if lock.torch_version and nofile is not None and nofile < NOFILE_MIN:  # a torch.multiprocessing need
        fix = (
            f"run with --ulimit nofile={NOFILE_FLAG_VALUE}"
            if docker
            else f"raise it with `ulimit -n {NOFILE_MIN}`"
        )
        warnings.append(
            f"nofile (open files) is {nofile}, under {NOFILE_MIN}: torch.multiprocessing keeps a descriptor "
            f"per shared tensor; {fix}"
        )

    cgroup = facts.get("cgroup", {})
    version = cgroup.get("version")
    limit = cgroup.get("memory_limit_bytes")
    if limit is not None:
        if lock.memory_gib is not None and limit < lock.memory_gib * GIB:
            fail(
                f"the container's memory limit is {_size(limit)} (cgroup v{version}), under the lock's "
                f"resources.memory_gib = {lock.memory_gib:g} GiB",
                f"--memory {math.ceil(lock.memory_gib)}g (or without --memory)",
            )
        elif lock.memory_gib is None and shm is not None and limit < shm:
            warnings.append(
                f"the container's memory limit ({_size(limit)}) is below /dev/shm ({_size(shm)}), whose "
                "pages count against it; raise --memory"
            )
    cpu_limits = {
        "cgroup quota (--cpus)": cgroup.get("cpu_quota_cores"),
        "cgroup cpuset (--cpuset-cpus)": cgroup.get("cpuset_cpus"),
        "affinity mask (--cpuset-cpus)": facts.get("affinity_cpus"),
    }
    known = {k: float(v) for k, v in cpu_limits.items() if v is not None}
    if lock.cpus is not None and known:
        which, cores = min(known.items(), key=lambda kv: kv[1])
        if cores < lock.cpus:
            flag = "--cpus" if "quota" in which else "--cpuset-cpus"
            need = f"{lock.cpus:g}" if flag == "--cpus" else f"with at least {math.ceil(lock.cpus)} CPUs"
            fail(
                f"the container may use {cores:g} CPU(s) (its {which}), under the lock's resources.cpus "
                f"= {lock.cpus:g}",
                f"{flag} {need}",
            )

    shown = {
        **facts,
        "shm_min_bytes": SHM_MIN_BYTES,
        "memory_gib": lock.memory_gib,
        "cpus": lock.cpus,
        "gpus": lock.gpus if lock.backend != "cpu" else 0,
        "warnings": warnings,
    }
    if errors:
        return StageResult(
            stage="container",
            status="failed",
            facts=shown,
            error="; ".join(errors),
            hint="add to `docker run` (or `envbuild validate --image ... --docker-arg`): "
            + " ".join(f.split(" (")[0] for f in fixes if f.startswith("--"))
            if any(f.startswith("--") for f in fixes)
            else None,
        )
    return StageResult(stage="container", status="passed", facts=shown, hint="; ".join(warnings) or None)
