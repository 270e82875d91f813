"""``envbuild validate --image TAG``: run the validator inside a container and copy the report out.

The lock is read from the image first (a created, never started, container) to pick the device
flags: NVIDIA -> a device request for ``all`` or N GPUs; AMD (backend rocm) -> ``/dev/kfd``,
``/dev/dri`` and the ``video`` group; CPU -> none unless ``--gpus`` is given.  The validator runs as
``/usr/local/bin/envbuild validate --out /tmp/envbuild-runs ...`` from its own venv; its run
directory is copied to the host's ``--out`` and the container is always removed.  The exit code is
the in-container validator's.
"""

from __future__ import annotations

import io
import os
import re
import shlex
import sys
import tarfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from envbuild.errors import EXIT_FINDINGS, BuildError, LockError, UsageError
from envbuild.image.engine import docker_client
from envbuild.image.refs import check_image_ref
from envbuild.models import LOCK_PATH_IN_IMAGE, Lock

RUNS_IN_CONTAINER = "/tmp/envbuild-runs"
VALIDATOR_IN_IMAGE = "/usr/local/bin/envbuild"
DEFAULT_TIMEOUT_S = 3600
MAX_REPORT_BYTES = 256 << 20


@dataclass(frozen=True)
class ImageRun:
    exit_code: int
    run_dirs: tuple[Path, ...]  # copied to the host
    seconds: float
    lock: Lock


def parse_gpus(value: str | None) -> int | None:
    """``all`` -> -1, ``N`` -> N (>= 1), ``none`` -> 0 (no device flags at all), None -> None."""
    if value is None:
        return None
    if value == "all":
        return -1
    if value == "none":
        return 0
    if value.isdigit() and int(value) >= 1:
        return int(value)
    raise UsageError(f"--gpus: {value!r} is not valid; use 'all', a number of GPUs >= 1, or 'none'")


# -- the run command: one rule for the README, the printed run line and validate --image --------------

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
    from envbuild.validate.container import STACK_BYTES, shm_size_gib

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


def device_options(lock: Lock, gpus: int | None, group_ids: Sequence[str] = ()) -> dict[str, Any]:
    """Keyword arguments for ``containers.create`` that expose the lock's accelerators (only those)."""
    kwargs = lock_run_options(lock, gpus, group_ids).create_kwargs()
    return {k: v for k, v in kwargs.items() if k in ("device_requests", "devices", "group_add")}


# -- --docker-arg: the user's own flags, on top of the recommended ones --------------------------------

# Flags that would make the validated container another one than the README runs, or that envbuild
# itself must set to start, wait for, copy from and remove the container: refused, with the reason.
REFUSED_DOCKER_ARGS: dict[str, str] = {
    "--user": "the image's own non-root user (uid 10001) is the user under test: another user opens other "
    "device nodes and files than the job will",
    "--entrypoint": "the validator is the container's command",
    "--privileged": "it grants every device and capability, so device and limit checks would pass for a "
    "reason the recommended run command does not give",
    "--rm": "envbuild removes the container itself, after copying the report out",
    "--detach": "envbuild starts the container and waits for it",
    "--interactive": "the validator reads no input",
    "--tty": "the validator's output is streamed as logs",
    "--name": "the container is named by the engine and removed after the run",
    "--network": "the validator's network is envbuild's to set (bridge)",
    "--gpus": "use `envbuild validate --image ... --gpus` (it also decides the device options)",
    "--workdir": "use `envbuild validate --workdir`",
}
_SHORT = {
    "-u": "--user",
    "-d": "--detach",
    "-i": "--interactive",
    "-t": "--tty",
    "-w": "--workdir",
    "-e": "--env",
    "-v": "--volume",
    "-m": "--memory",
    "--net": "--network",
}
# Accepted flags, each taking one value.
DOCKER_ARG_FLAGS = (
    "--cap-add",
    "--cpus",
    "--cpuset-cpus",
    "--device",
    "--env",
    "--group-add",
    "--ipc",
    "--memory",
    "--memory-swap",
    "--security-opt",
    "--shm-size",
    "--tmpfs",
    "--ulimit",
    "--volume",
)


def parse_docker_args(items: Sequence[str]) -> list[tuple[str, str]]:
    """``--docker-arg`` values as (flag, value) pairs.

    Each item is ``--flag=value``, ``--flag value``, or a ``--flag`` whose value is the next item.
    A refused flag or an unknown one is a :class:`UsageError` naming it, and why or what is accepted.
    """
    pairs: list[tuple[str, str]] = []
    pending: str | None = None
    for item in items:
        if pending is not None:
            pairs.append((pending, item))
            pending = None
            continue
        text = item.strip()
        flag, value = text, None
        for sep in ("=", " "):
            if sep in text:
                head, _, tail = text.partition(sep)
                if head.startswith("-") and (sep == "=" or "=" not in head):
                    flag, value = head, tail.strip()
                    break
        flag = _SHORT.get(flag, flag)
        if flag in REFUSED_DOCKER_ARGS or flag.lstrip("-") in ("it", "ti"):
            why = REFUSED_DOCKER_ARGS.get(flag, REFUSED_DOCKER_ARGS["--tty"])
            raise UsageError(f"--docker-arg {item!r}: {flag} is not allowed: {why}")
        if flag not in DOCKER_ARG_FLAGS:
            raise UsageError(
                f"--docker-arg {item!r}: not a flag envbuild passes on (accepted: "
                f"{', '.join(DOCKER_ARG_FLAGS)}; each with its value, e.g. --docker-arg=--shm-size=2g)"
            )
        if value is None:
            pending = flag
        elif not value:
            raise UsageError(f"--docker-arg {item!r}: {flag} needs a value")
        else:
            pairs.append((flag, value))
    if pending is not None:
        raise UsageError(f"--docker-arg {pending}: needs a value (give it as --docker-arg={pending}=VALUE)")
    return pairs


def _bytes(flag: str, value: str) -> int:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([bkmg]?)", value.strip().lower())
    if not match:
        raise UsageError(f"--docker-arg {flag}={value}: not a size (e.g. 512m, 2g)")
    unit = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[match.group(2)]
    return int(float(match.group(1)) * unit)


def apply_docker_args(kwargs: dict[str, Any], pairs: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """The recommended ``containers.create`` options with the user's flags applied on top.

    A flag replaces what the recommendation set for the same thing (``--shm-size`` replaces
    ``--ipc=host`` and the reverse, ``--ulimit NAME=`` replaces that limit); list flags add.
    """
    from docker.types import Ulimit

    out = dict(kwargs)
    for flag, value in pairs:
        if flag == "--shm-size":
            out.pop("ipc_mode", None)
            out["shm_size"] = _bytes(flag, value)
        elif flag == "--ipc":
            out.pop("shm_size", None)
            out["ipc_mode"] = value
        elif flag == "--memory":
            out["mem_limit"] = _bytes(flag, value)
        elif flag == "--memory-swap":
            out["memswap_limit"] = -1 if value == "-1" else _bytes(flag, value)
        elif flag == "--cpus":
            try:
                out["nano_cpus"] = int(float(value) * 1e9)
            except ValueError:
                raise UsageError(f"--docker-arg --cpus={value}: not a number of CPUs") from None
        elif flag == "--cpuset-cpus":
            out["cpuset_cpus"] = value
        elif flag == "--ulimit":
            name, sep, limits = value.partition("=")
            soft, _, hard = limits.partition(":")
            try:
                limit = Ulimit(name=name, soft=int(soft), hard=int(hard or soft))
            except ValueError:
                raise UsageError(f"--docker-arg --ulimit={value}: expected NAME=SOFT[:HARD]") from None
            if not sep or not name:
                raise UsageError(f"--docker-arg --ulimit={value}: expected NAME=SOFT[:HARD]")
            out["ulimits"] = [u for u in out.get("ulimits", []) if u.name != name] + [limit]
        elif flag == "--env":  # NAME alone takes this process's value, as docker run -e NAME does
            if "=" not in value and value in os.environ:
                value = f"{value}={os.environ[value]}"
            out.setdefault("environment", []).append(value)
        elif flag == "--tmpfs":
            path, _, options = value.partition(":")
            out.setdefault("tmpfs", {})[path] = options
        else:
            key = {
                "--cap-add": "cap_add",
                "--device": "devices",
                "--group-add": "group_add",
                "--security-opt": "security_opt",
                "--volume": "volumes",
            }[flag]
            out[key] = [*out.get(key, []), value]
    return out


def read_lock_from_image(client: Any, tag: str) -> Lock:
    from docker.errors import APIError, ImageNotFound, NotFound

    try:
        container = client.containers.create(tag, command=["true"], entrypoint=[])
    except ImageNotFound:
        raise UsageError(
            f"--image {tag}: no such image here (build it with `envbuild build ... --tag {tag}`)"
        ) from None
    except APIError as exc:
        raise BuildError(f"--image {tag}: cannot create a container: {exc.explanation or exc}") from None
    try:
        try:
            chunks, _ = container.get_archive(LOCK_PATH_IN_IMAGE)
        except NotFound:
            raise LockError(
                f"--image {tag}: no lock at {LOCK_PATH_IN_IMAGE}; was it built from an envbuild bundle?"
            ) from None
        data = _read_single_file(b"".join(chunks), LOCK_PATH_IN_IMAGE)
    finally:
        container.remove(force=True)
    try:
        return Lock.model_validate_json(data)
    except ValueError as exc:
        raise LockError(
            f"--image {tag}: {LOCK_PATH_IN_IMAGE}: not a valid lock ({str(exc).splitlines()[0]})"
        ) from None


def _read_single_file(archive: bytes, what: str) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar:
            if member.isfile():
                handle = tar.extractfile(member)
                if handle is not None:
                    return handle.read()
    raise LockError(f"{what}: not a regular file in the image")


def extract_runs(archive: bytes, out: Path) -> tuple[Path, ...]:
    """Extract the copied ``envbuild-runs/`` folder's run directories into ``out``.

    Only regular files and folders are taken; absolute names, ``..``, links and devices are refused,
    so a hostile image cannot write outside ``out``.
    """
    out.mkdir(parents=True, exist_ok=True)
    root = out.resolve()
    created: set[Path] = set()
    total = 0
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar:
            parts = PurePosixPath(member.name).parts
            if not parts or PurePosixPath(member.name).is_absolute() or ".." in parts:
                raise BuildError(f"report archive: refusing entry {member.name!r}")
            rel = parts[1:]  # drop the leading "envbuild-runs"
            if not rel:
                continue
            target = root.joinpath(*rel)
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
            elif member.isfile():
                total += member.size
                if total > MAX_REPORT_BYTES:
                    raise BuildError(f"report archive: larger than {MAX_REPORT_BYTES} bytes; refusing it")
                target.parent.mkdir(parents=True, exist_ok=True)
                handle = tar.extractfile(member)
                if handle is None:
                    continue
                target.write_bytes(handle.read())
            else:
                raise BuildError(f"report archive: refusing {member.name!r} (not a regular file or folder)")
            created.add(root / rel[0])
    return tuple(sorted(created))


def _pump_logs(container: Any, echo: Callable[[str], None]) -> None:
    buffer = b""
    for raw in container.logs(stream=True, follow=True):
        buffer += raw
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            echo(line.decode("utf-8", "replace"))
    if buffer:
        echo(buffer.decode("utf-8", "replace"))


def validate_image(
    tag: str,
    *,
    out: Path,
    gpus: str | None = None,
    validator_args: Sequence[str] = (),
    docker_args: Sequence[str] = (),
    timeout_s: int = DEFAULT_TIMEOUT_S,
    network: str = "bridge",
    echo: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
    client: Any = None,
) -> ImageRun:
    """Run ``envbuild validate`` inside ``tag`` with the recommended run options (:func:`run_options`,
    the host's own group ids for AMD) and the user's ``docker_args`` on top; copy its run directory
    into ``out``."""
    check_image_ref(tag, "--image")
    count = parse_gpus(gpus)
    extras = parse_docker_args(docker_args)  # a refused flag: exit 2 before the engine is contacted
    docker = client if client is not None else docker_client()
    lock = read_lock_from_image(docker, tag)
    options = lock_run_options(lock, count, host_group_ids())
    args = [*options.cli_args(), *(f"{flag}={value}" for flag, value in extras)]
    echo(f"envbuild: validating {tag} as `docker run {' '.join(shlex.quote(a) for a in args)} {tag}`")
    command = [VALIDATOR_IN_IMAGE, "validate", "--out", RUNS_IN_CONTAINER, *validator_args]
    started = time.monotonic()
    try:
        container = docker.containers.create(
            tag,
            command=command,
            entrypoint=[],
            network_mode=network,
            labels={"org.envbuild.role": "validate"},
            **apply_docker_args(options.create_kwargs(), extras),
        )
    except Exception as exc:  # docker.errors.APIError: e.g. no NVIDIA runtime on this host
        hint = " (is the NVIDIA container toolkit installed?)" if lock.backend == "cuda" or count else ""
        raise BuildError(f"--image {tag}: cannot create the container{hint}: {exc}") from None
    try:
        try:
            container.start()
        except Exception as exc:  # docker.errors.APIError: typically no validator in the image
            detail = getattr(exc, "explanation", None) or str(exc)
            hint = ""
            if "rlimit" in detail:
                hint = (
                    "; this engine may not raise the limits asked for (a rootless or nested engine): "
                    "lower them with --docker-arg=--ulimit=NAME=SOFT:HARD"
                )
            elif VALIDATOR_IN_IMAGE in detail or "no such file" in detail.lower():
                hint = (
                    f"; the image has no validator at {VALIDATOR_IN_IMAGE}: run `envbuild fetch BUNDLE` "
                    "(it fills tools/) and rebuild"
                )
            raise BuildError(f"--image {tag}: cannot start the validator: {detail}{hint}") from None
        pump = threading.Thread(target=_pump_logs, args=(container, echo), daemon=True)
        pump.start()
        try:
            status = container.wait(timeout=timeout_s)
        except Exception as exc:  # requests' ReadTimeout, or the engine went away
            raise BuildError(
                f"--image {tag}: the validator did not finish within {timeout_s} s ({exc})"
            ) from None
        pump.join(timeout=10)
        exit_code = int(status.get("StatusCode", EXIT_FINDINGS))
        try:
            chunks, _ = container.get_archive(RUNS_IN_CONTAINER)
            runs = extract_runs(b"".join(chunks), out)
        except Exception as exc:  # no report is itself the failure to report
            if exit_code == 0:
                raise BuildError(
                    f"the validator exited 0 but left no report in {RUNS_IN_CONTAINER}: {exc}"
                ) from None
            runs = ()
    finally:
        container.remove(force=True)
    return ImageRun(exit_code, runs, time.monotonic() - started, lock)
