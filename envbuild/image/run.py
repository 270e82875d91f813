"""``envbuild validate --image TAG``: run the validator inside a container and copy the report out.

The lock is read from the image first (a created, never started, container) to pick the device
flags: NVIDIA -> a device request for ``all`` or N GPUs; AMD (backend rocm) -> ``/dev/kfd``,
``/dev/dri`` and the ``video`` group; CPU -> none unless ``--gpus`` is given.  An NVIDIA request on a
host whose Docker cannot serve it is decided by :mod:`envbuild.image.gpu_host`.  The validator runs as
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

from envbuild.boundary import InvalidData, parse_json
from envbuild.errors import EXIT_FINDINGS, BuildError, LockError, UsageError
from envbuild.image.engine import docker_client
from envbuild.image.gpu_host import GpuSupport, fallback_message, plan_gpus
from envbuild.image.refs import check_image_ref
from envbuild.models import LOCK_PATH_IN_IMAGE, Lock
from envbuild.runopts import host_group_ids, lock_run_options

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
    no_gpus: GpuSupport | None = None  # validated without GPUs: this host's Docker cannot pass them


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
        return parse_json(Lock, data)
    except InvalidData as exc:
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
    """The container's output, line by line, its control characters shown as escapes (the image and the
    machine are untrusted: envbuild.untrusted)."""
    from envbuild.untrusted import terminal

    buffer = b""
    for raw in container.logs(stream=True, follow=True):
        buffer += raw
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            echo(terminal(line.decode("utf-8", "replace")))
    if buffer:
        echo(terminal(buffer.decode("utf-8", "replace")))


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
    """Run ``envbuild validate`` inside ``tag`` with the recommended run options
    (:func:`envbuild.runopts.run_options`, the host's own group ids for AMD) and the user's
    ``docker_args`` on top; copy its run directory into ``out``."""
    check_image_ref(tag, "--image")
    count = parse_gpus(gpus)
    extras = parse_docker_args(docker_args)  # a refused flag: exit 2 before the engine is contacted
    docker = client if client is not None else docker_client()
    lock = read_lock_from_image(docker, tag)
    plan = plan_gpus(docker, tag, lock, count, validator_args)  # no NVIDIA runtime: see gpu_host
    if plan.fallback is not None:
        echo(fallback_message(plan.fallback))
        count = 0  # as --gpus none
    options = lock_run_options(lock, count, host_group_ids())
    args = [*options.cli_args(), *(f"{flag}={value}" for flag, value in extras)]
    echo(f"envbuild: validating {tag} as `docker run {' '.join(shlex.quote(a) for a in args)} {tag}`")
    command = [VALIDATOR_IN_IMAGE, "validate", "--out", RUNS_IN_CONTAINER, *plan.validator_args]
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
    return ImageRun(exit_code, runs, time.monotonic() - started, lock, plan.fallback)
