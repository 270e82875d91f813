"""Stage ``container``: what the container (or machine) lets the job do, before any real work.

Facts are read by the validator's own process (:mod:`envbuild.validate.container_facts`), which runs
as the image's user (uid 10001) with the container's limits, like the job will: the size of
``/dev/shm``; every device node the backend needs (``/dev/nvidiactl``, ``/dev/nvidia-uvm``,
``/dev/nvidiaN``; ``/dev/kfd``, ``/dev/dri/renderD*``) opened for reading and writing; the memlock,
nofile and stack limits; the cgroup (v1 or v2) memory and CPU limits against the lock's
``resources``.  :func:`decide_container` is pure: every failure names the ``docker run`` flag that
fixes it inside a container (:func:`~envbuild.validate.container_facts.in_container`), and what to
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

import math
from typing import Any

from envbuild.models import Lock
from envbuild.report.model import StageResult
from envbuild.runopts import shm_size_gib
from envbuild.validate.container_facts import NVIDIA_GPU, RENDER_NODE

GIB = 1 << 30
SHM_MIN_BYTES = GIB
NOFILE_MIN = 65536
NOFILE_FLAG_VALUE = 1048576  # the kernel's default fs.nr_open: the most a hard limit may be


# -- the run-command rules (shared with envbuild.runopts) --------------------------------------------


def shm_fix(memory_gib: float | None) -> str:
    size = shm_size_gib(memory_gib)
    return f"--shm-size {size}g" if size is not None else "--ipc=host (or --shm-size 8g)"


def device_fix(backend: str) -> str:
    if backend == "rocm":
        return "--device /dev/kfd --device /dev/dri"
    return "--gpus all (with the NVIDIA container toolkit)"


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
        pattern = NVIDIA_GPU if lock.backend == "cuda" else RENDER_NODE
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
