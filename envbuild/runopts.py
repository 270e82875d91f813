"""``docker run`` options: one rule for the bundle README's run lines, the line ``envbuild build``
prints, and the container ``envbuild validate --image`` creates (:mod:`envbuild.image.run`), so the
container validated is the one the user will run.  The container stage
(:mod:`envbuild.validate.container`) checks the same limits from inside.

Pure and light: render imports it, so nothing here imports docker, pydantic models beyond the lock's
type, or the validate package.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envbuild.models import Lock

STACK_BYTES = 67108864  # 64 MiB, NGC's --ulimit stack=67108864


def shm_size_gib(memory_gib: float | None) -> int | None:
    """``--shm-size`` in whole GiB for a declared memory need (half of it, at least 1), or None for
    ``--ipc=host``."""
    if memory_gib is None:
        return None
    return max(1, math.ceil(memory_gib / 2))


# AMD: the nodes whose host group ids the image's user (uid 10001) needs.  The groups' names (video,
# render) do not help: the image's /etc/group does not know the host's ids, which vary from host to host.
AMD_GROUP_NODES = ("/dev/kfd", "/dev/dri/renderD128")
AMD_DEVICES = ("/dev/kfd", "/dev/dri")


@dataclass(frozen=True)
class RunOptions:
    """The ``docker run`` options envbuild recommends for a lock, each with its reason.

    ``group_add`` holds numeric ids (validate --image, read from this host's nodes) or shell
    substitutions (the README: ``"$(stat -c %g /dev/kfd)"``, evaluated on the host that runs it).
    """

    ipc_host: bool
    shm_size_gib: int | None
    gpus: int | None  # an NVIDIA device request: -1 all, N; None: none
    devices: tuple[str, ...]
    group_add: tuple[str, ...]
    ulimits: tuple[tuple[str, int], ...]  # (name, soft = hard); -1 is unlimited

    def cli_args(self) -> list[str]:
        args: list[str] = []
        if self.gpus is not None:
            args += ["--gpus", "all" if self.gpus < 0 else str(self.gpus)]
        for device in self.devices:
            args += ["--device", device]
        for group in self.group_add:
            args += ["--group-add", group]
        args += ["--ipc=host"] if self.ipc_host else []
        args += ["--shm-size", f"{self.shm_size_gib}g"] if self.shm_size_gib is not None else []
        for name, value in self.ulimits:
            args += ["--ulimit", f"{name}={value}"]
        return args

    def create_kwargs(self) -> dict[str, Any]:
        """The same options as keyword arguments for docker-py's ``containers.create``."""
        from docker.types import DeviceRequest, Ulimit

        kwargs: dict[str, Any] = {}
        if self.gpus is not None:
            kwargs["device_requests"] = [DeviceRequest(count=self.gpus, capabilities=[["gpu"]])]
        if self.devices:
            kwargs["devices"] = [f"{d}:{d}:rwm" for d in self.devices]
        if self.group_add:
            kwargs["group_add"] = list(self.group_add)
        if self.ipc_host:
            kwargs["ipc_mode"] = "host"
        if self.shm_size_gib is not None:
            kwargs["shm_size"] = f"{self.shm_size_gib}g"
        if self.ulimits:
            kwargs["ulimits"] = [Ulimit(name=n, soft=v, hard=v) for n, v in self.ulimits]
        return kwargs

    def reasons(self) -> list[tuple[str, str]]:
        """(flag, why) for each option, for the README."""
        out: list[tuple[str, str]] = []
        if self.gpus is not None:
            out.append(
                ("--gpus all", "the NVIDIA container toolkit exposes every GPU and its driver libraries")
            )
        if self.devices:
            out.append(
                (
                    "--device /dev/kfd --device /dev/dri",
                    "the ROCm compute interface and the GPUs' render nodes",
                )
            )
        if self.group_add:
            out.append(
                (
                    "--group-add $(stat -c %g ...)",
                    "the image runs as uid 10001, not root; the host's nodes belong to its render and video "
                    "groups, whose ids vary from host to host (a group name resolves in the image, not on "
                    "the host), so the ids are read from the nodes themselves",
                )
            )
        if self.ipc_host:
            out.append(
                (
                    "--ipc=host",
                    "the host's /dev/shm (the kernel sizes it at half the RAM): DataLoader workers pass "
                    "batches through shared memory, and Docker's default 64 MB ends in 'bus error'; "
                    "declare resources.memory_gib to get a sized, private --shm-size instead",
                )
            )
        if self.shm_size_gib is not None:
            out.append(
                (
                    f"--shm-size {self.shm_size_gib}g",
                    "half of resources.memory_gib (the kernel's default share for tmpfs): DataLoader "
                    "workers pass batches through shared memory, and Docker's default 64 MB ends in 'bus "
                    "error'",
                )
            )
        for name, value in self.ulimits:
            why = {
                "memlock": "NCCL over InfiniBand/RoCE pins its buffers (ibv_reg_mr); NGC's containers ask "
                "for it",
                "stack": "64 MiB stacks, as NGC's PyTorch containers ask",
                "nofile": "torch.multiprocessing keeps a descriptor open per shared tensor",
            }[name]
            out.append((f"--ulimit {name}={value}", why))
        return out


def run_options(
    backend: str,
    *,
    gpus: int | None = None,
    memory_gib: float | None = None,
    group_ids: Sequence[str] | None = None,
) -> RunOptions:
    """The one rule for ``docker run`` options (README, printed run lines, ``validate --image``).

    ``gpus``: None (the backend's default: all NVIDIA GPUs), -1 all, N, 0 none (no device options).
    ``group_ids``: for ROCm, the host's group ids of the device nodes; None writes the shell
    substitutions that read them on the host.  No security option is added: none is needed for these
    devices, and none is given away (no --privileged, no seccomp=unconfined).
    """
    shm = shm_size_gib(memory_gib)
    accelerated = backend in ("cuda", "rocm") and gpus != 0
    ulimits: list[tuple[str, int]] = []
    if accelerated or (gpus is not None and gpus != 0):
        ulimits += [("memlock", -1), ("stack", STACK_BYTES)]
    # No nofile flag: Docker's usual default (the daemon's, 1048576) is already high, and an engine that
    # may not raise limits (rootless, nested) refuses to start a container that asks for more than it
    # has; the container stage warns below NOFILE_MIN and names the flag.
    nvidia: int | None = None
    devices: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    if gpus != 0 and backend == "rocm":
        devices = AMD_DEVICES
        if group_ids is None:
            groups = tuple(f'"$(stat -c %g {node})"' for node in AMD_GROUP_NODES)
        else:
            groups = tuple(group_ids)
    elif gpus != 0 and (backend == "cuda" or gpus is not None):
        nvidia = -1 if gpus is None else gpus
    return RunOptions(
        ipc_host=shm is None,
        shm_size_gib=shm,
        gpus=nvidia,
        devices=devices,
        group_add=groups,
        ulimits=tuple(ulimits),
    )


def lock_run_options(
    lock: Lock, gpus: int | None = None, group_ids: Sequence[str] | None = None
) -> RunOptions:
    return run_options(lock.backend, gpus=gpus, memory_gib=lock.memory_gib, group_ids=group_ids)


def host_group_ids(dev: Path = Path("/dev")) -> tuple[str, ...]:
    """This host's group ids of /dev/kfd and every /dev/dri/renderD* (as validate --image passes them)."""
    nodes = [dev / "kfd", *sorted((dev / "dri").glob("renderD*"))]
    gids: list[str] = []
    for node in nodes:
        try:
            gid = str(node.stat().st_gid)
        except OSError:
            continue
        if gid not in gids:
            gids.append(gid)
    return tuple(gids)


def run_command(
    lock: Lock | None = None,
    tag: str = "IMAGE",
    *,
    options: RunOptions | None = None,
    sep: str = " ",
) -> str:
    """The ``docker run`` line for a lock (or given options), as a shell command; ``sep`` goes between
    the options (``" \\\n  "`` for one per line)."""
    opts = options if options is not None else lock_run_options(_need(lock))
    words = opts.cli_args()
    groups: list[str] = ["docker run --rm -it"]
    index = 0
    while index < len(words):  # a flag and its value stay together
        flag = words[index]
        if "=" in flag or index + 1 >= len(words):
            groups.append(shlex.quote(flag))
            index += 1
            continue
        value = words[index + 1]
        groups.append(f"{flag} {value if value.startswith(chr(34) + '$(') else shlex.quote(value)}")
        index += 2
    groups.append(f'-v "$PWD/runs:/workspace/runs" {shlex.quote(tag)}')
    return sep.join(groups)


def _need(lock: Lock | None) -> Lock:
    if lock is None:
        raise ValueError("run_command needs a lock or options")
    return lock
