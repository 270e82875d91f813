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
import sys
import tarfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from envbuild.build.engine import docker_client
from envbuild.build.refs import check_image_ref
from envbuild.errors import EXIT_FINDINGS, BuildError, LockError, UsageError
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


def device_options(lock: Lock, gpus: int | None) -> dict[str, Any]:
    """Keyword arguments for ``containers.create`` that expose the lock's accelerators."""
    from docker.types import DeviceRequest

    if gpus == 0:  # --gpus none: run without devices (the accelerator stage then says what is missing)
        return {}
    if lock.backend == "rocm":
        return {"devices": ["/dev/kfd:/dev/kfd:rwm", "/dev/dri:/dev/dri:rwm"], "group_add": ["video"]}
    if lock.backend == "cuda" or gpus is not None:
        count = -1 if gpus is None else gpus
        return {"device_requests": [DeviceRequest(count=count, capabilities=[["gpu"]])]}
    return {}


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
    timeout_s: int = DEFAULT_TIMEOUT_S,
    network: str = "bridge",
    echo: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
    client: Any = None,
) -> ImageRun:
    """Run ``envbuild validate`` inside ``tag``; copy its run directory into ``out``."""
    check_image_ref(tag, "--image")
    count = parse_gpus(gpus)
    docker = client if client is not None else docker_client()
    lock = read_lock_from_image(docker, tag)
    command = [VALIDATOR_IN_IMAGE, "validate", "--out", RUNS_IN_CONTAINER, *validator_args]
    started = time.monotonic()
    try:
        container = docker.containers.create(
            tag,
            command=command,
            entrypoint=[],
            network_mode=network,
            labels={"org.envbuild.role": "validate"},
            **device_options(lock, count),
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
            if VALIDATOR_IN_IMAGE in detail or "no such file" in detail.lower():
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
