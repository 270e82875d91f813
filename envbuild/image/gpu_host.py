"""``envbuild validate --image``: whether this host's Docker can pass NVIDIA GPUs to a container.

Docker serves ``--gpus`` (a device request with the ``gpu`` capability) through a device driver that
it registers only when the NVIDIA container toolkit is there: the ``nvidia`` runtime in
``/etc/docker/daemon.json``, which ``docker info`` lists under Runtimes; or, without that entry,
``nvidia-container-runtime-hook`` on the daemon's PATH, which ``docker info`` does not show.  Engines
with CDI list the devices their CDI specs name (DiscoveredDevices, ``nvidia.com/gpu=...``), which a
``--gpus`` request need not use.  So the engine's info is read first: with an ``nvidia`` runtime the
GPUs are requested as before.  Without one, the engine itself is asked: a throwaway container of the
image, with the same device request, is created and started (command ``true``) and removed.  If the
engine refuses it, the host has no way to pass GPUs, and :func:`plan_gpus` decides what
``validate --image`` does:

- no ``--gpus`` (the CUDA default, ``all``): say so first, then validate as ``--gpus none`` would (no
  GPU request, and none of the GPU-only limits: ``--ulimit memlock=-1`` does not start on a rootless or
  nested engine, the usual GPU-less host) and with ``--keep-going``, so every stage that needs no GPU
  runs and the report is written;
  the GPU stages fail there, and the command never exits 0 (see :mod:`envbuild.cli._validate`);
- ``--gpus all`` or ``--gpus N`` given: :class:`NoGpuRuntime` before anything is started or written.
  The user asked for GPUs, which this engine cannot give: running without them would validate
  another container than the one asked for, and docker's own words at start name no cause.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envbuild.errors import EXIT_ENGINE, EnvbuildError
from envbuild.models import Lock
from envbuild.runopts import lock_run_options

CDI_GPU_KIND = "nvidia.com/gpu"


class NoGpuRuntime(EnvbuildError):
    """``--gpus`` asked for NVIDIA GPUs, and this host's Docker cannot pass them to a container."""

    exit_code = EXIT_ENGINE
    code = "E-NO-GPU-RUNTIME"


@dataclass(frozen=True)
class GpuSupport:
    """What the engine says about NVIDIA GPUs: its runtimes, its CDI GPU devices, and, when neither
    names NVIDIA, whether it refused a GPU request (its own words) or served it."""

    runtimes: tuple[str, ...]
    cdi_devices: tuple[str, ...]
    refusal: str | None = None  # None: listed, or the trial container started

    @property
    def available(self) -> bool:
        return self.refusal is None

    def diagnosis(self) -> str:
        """The reason in one sentence, for a host without GPU support.  The engine's names and words are
        the rented machine's text: shown on one line, control characters as escapes."""
        from envbuild.untrusted import one_line

        runtimes = one_line(", ".join(self.runtimes) or "none")
        cdi = (
            f"CDI devices {one_line(', '.join(self.cdi_devices))}"
            if self.cdi_devices
            else f"no {CDI_GPU_KIND} CDI device"
        )
        return (
            f"this host's Docker has no NVIDIA runtime (its runtimes: {runtimes}; {cdi}), and it refuses a "
            f"GPU request ({one_line(self.refusal)}): the GPUs cannot be passed to the container"
        )


def engine_gpu_support(client: Any, tag: str, count: int = -1) -> GpuSupport:
    """Ask the engine behind ``client`` (a ``docker.DockerClient``) whether ``--gpus`` works, with a
    container of ``tag`` only when its info names no NVIDIA runtime."""
    info = client.info()
    runtimes = tuple(sorted(info.get("Runtimes") or {}))
    cdi = tuple(
        str(device.get("ID"))
        for device in info.get("DiscoveredDevices") or []
        if str(device.get("ID", "")).startswith(CDI_GPU_KIND + "=")
    )
    if "nvidia" in runtimes:
        return GpuSupport(runtimes, cdi)
    return GpuSupport(runtimes, cdi, _refusal(client, tag, count))


def _refusal(client: Any, tag: str, count: int) -> str | None:
    """The engine's words when it refuses to start a container of ``tag`` with ``count`` GPUs (-1 all),
    else None.  The container runs ``true`` and is removed either way."""
    from docker.errors import APIError
    from docker.types import DeviceRequest

    request = [DeviceRequest(count=count, capabilities=[["gpu"]])]
    try:
        container = client.containers.create(
            tag,
            command=["true"],
            entrypoint=[],
            device_requests=request,
            labels={"org.envbuild.role": "validate-gpu-check"},
        )
    except APIError as exc:
        return str(exc.explanation or exc)
    try:
        container.start()
    except APIError as exc:
        return str(exc.explanation or exc)
    finally:
        container.remove(force=True)
    return None


@dataclass(frozen=True)
class GpuPlan:
    validator_args: tuple[str, ...]
    fallback: GpuSupport | None  # set: validating as --gpus none because of it


def plan_gpus(client: Any, tag: str, lock: Lock, gpus: int | None, validator_args: Sequence[str]) -> GpuPlan:
    """The GPUs to request for ``lock`` on this host: as asked when the engine can pass them (or when
    no NVIDIA request is made at all); else without GPUs and with ``--keep-going`` when the user gave
    no ``--gpus``; else (``--gpus all`` / ``N`` given) :class:`NoGpuRuntime`."""
    args = tuple(validator_args)
    wanted = lock_run_options(lock, gpus).gpus
    if wanted is None:  # no NVIDIA request: CPU lock, ROCm, or --gpus none
        return GpuPlan(args, None)
    support = engine_gpu_support(client, tag, wanted)
    if support.available:
        return GpuPlan(args, None)
    if gpus is not None:
        flag = "--gpus " + ("all" if gpus < 0 else str(gpus))
        raise NoGpuRuntime(
            f"--image {tag} {flag}: {support.diagnosis()}. Run it on the rented machine, with the NVIDIA "
            f"container toolkit installed; here, drop {flag} to run every stage that needs no GPU (the "
            "report then fails at the GPU stages)"
        )
    if "--keep-going" not in args:
        args += ("--keep-going",)
    return GpuPlan(args, support)


def fallback_message(support: GpuSupport) -> str:
    """What ``validate --image`` says first when it validates without GPUs."""
    return (
        f"envbuild: {support.diagnosis()}. Validating without them (as --gpus none) and with "
        "--keep-going, so every stage that needs no GPU still runs; the stages that need one fail, and "
        "this run cannot pass"
    )


def rented_machine_line(tag: str, first_failure: str | None) -> str:
    """The closing line of a run without GPUs: not a pass, its first failure, and what to run where the
    GPUs are."""
    failure = f"; first failure: {first_failure}" if first_failure else ""
    return (
        f"envbuild: not a pass: no GPU was passed to the container{failure}. On the rented machine: "
        f"`envbuild validate --image {tag}` with the NVIDIA container toolkit installed (`--gpus all`)"
    )


def first_failure(run_dir: Path) -> str | None:
    """``STAGE: ERROR`` of a copied report's first failure (None: none, or no readable report)."""
    try:
        report = json.loads((run_dir / "report.json").read_text(encoding="utf-8"))
        failure = report.get("first_failure") or {}
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(failure, dict) or not failure.get("stage"):
        return None
    return f"{failure['stage']}: {failure.get('error')}"


def without_gpus_json(data: dict[str, Any], tag: str, support: GpuSupport) -> dict[str, Any]:
    """``validate --image --json``'s object for a run without GPUs: never ok, and its first finding says
    why and what to run on the rented machine."""
    finding = {
        "severity": "error",
        "code": NoGpuRuntime.code,
        "message": f"{support.diagnosis()}; on the rented machine: `envbuild validate --image {tag}` "
        "with the NVIDIA container toolkit installed (`--gpus all`)",
        "source": None,
    }
    return {**data, "ok": False, "findings": [finding, *data.get("findings", [])]}
