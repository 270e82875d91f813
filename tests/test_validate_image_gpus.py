"""``validate --image`` on a host whose Docker cannot pass NVIDIA GPUs (:mod:`envbuild.image.gpu_host`),
without an engine: a stand-in client answers ``info()`` as this machine's engine does (docker 20.10, no
NVIDIA runtime) and refuses a GPU request with docker's own words.  The real engine is in
``tests/test_container_docker.py`` (``test_cuda_lock_on_a_host_without_the_nvidia_runtime``)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from docker.errors import APIError

from envbuild.cli.app import cli
from envbuild.image import run as image_run
from envbuild.image.gpu_host import (
    GpuSupport,
    NoGpuRuntime,
    engine_gpu_support,
    first_failure,
    plan_gpus,
)
from envbuild.models import read_lock

LOCK = read_lock(Path(__file__).parent / "data" / "bundles" / "tiny" / "envbuild.lock.json")
CUDA = replace(LOCK, backend="cuda")
REFUSED = 'could not select device driver "" with capabilities: [[gpu]]'
RUNC = {"io.containerd.runc.v2": {"path": "runc"}, "runc": {"path": "runc"}}


class Container:
    def __init__(self, engine: Engine, kwargs: dict[str, Any]) -> None:
        self.engine, self.kwargs, self.removed = engine, kwargs, False

    def start(self) -> None:
        if self.engine.refuse and self.kwargs.get("device_requests"):
            raise APIError("500 Server Error", explanation=REFUSED)

    def remove(self, force: bool = False) -> None:
        self.removed = force


class Engine:
    """``docker.DockerClient`` as far as gpu_host uses it."""

    def __init__(self, info: dict[str, Any], refuse: bool = True) -> None:
        self._info, self.refuse = info, refuse
        self.created: list[Container] = []
        self.containers = self

    def info(self) -> dict[str, Any]:
        return self._info

    def create(self, tag: str, **kwargs: Any) -> Container:
        container = Container(self, kwargs)
        self.created.append(container)
        return container


def test_no_runtime_and_a_refused_request_is_no_support() -> None:
    engine = Engine({"Runtimes": RUNC})
    support = engine_gpu_support(engine, "img:1")
    assert not support.available and support.refusal == REFUSED
    assert support.runtimes == ("io.containerd.runc.v2", "runc")
    (trial,) = engine.created
    assert trial.removed and trial.kwargs["command"] == ["true"]
    (request,) = trial.kwargs["device_requests"]
    assert request["Count"] == -1 and request["Capabilities"] == [["gpu"]]
    assert support.diagnosis() == (
        "this host's Docker has no NVIDIA runtime (its runtimes: io.containerd.runc.v2, runc; no "
        f"nvidia.com/gpu CDI device), and it refuses a GPU request ({REFUSED}): the GPUs cannot be passed "
        "to the container"
    )


def test_an_nvidia_runtime_is_trusted_without_a_trial() -> None:
    engine = Engine({"Runtimes": {**RUNC, "nvidia": {"path": "nvidia-container-runtime"}}})
    assert engine_gpu_support(engine, "img:1").available and engine.created == []


def test_cdi_devices_alone_are_tried_and_named() -> None:
    """A CDI spec's devices (DiscoveredDevices, Docker >= 28.2) need not serve a --gpus request: tried."""
    cdi = [{"Source": "cdi", "ID": "nvidia.com/gpu=all"}, {"Source": "cdi", "ID": "vendor.com/x=0"}]
    engine = Engine({"Runtimes": RUNC, "DiscoveredDevices": cdi})
    support = engine_gpu_support(engine, "img:1")
    assert not support.available and len(engine.created) == 1
    assert support.cdi_devices == ("nvidia.com/gpu=all",)
    assert (
        "(its runtimes: io.containerd.runc.v2, runc; CDI devices nvidia.com/gpu=all)" in support.diagnosis()
    )


def test_the_hook_alone_is_found_by_the_trial() -> None:
    """No runtime listed, but the engine serves --gpus (nvidia-container-runtime-hook on its PATH)."""
    engine = Engine({"Runtimes": RUNC}, refuse=False)
    assert engine_gpu_support(engine, "img:1").available and len(engine.created) == 1


def test_plan_without_gpus_falls_back_to_none_with_keep_going() -> None:
    plan = plan_gpus(Engine({"Runtimes": RUNC}), "img:1", CUDA, None, ["--stages", "packages"])
    assert plan.fallback is not None
    assert plan.validator_args == ("--stages", "packages", "--keep-going")
    again = plan_gpus(Engine({"Runtimes": RUNC}), "img:1", CUDA, None, ["--keep-going"])
    assert again.validator_args == ("--keep-going",)


@pytest.mark.parametrize(("gpus", "flag"), [(-1, "--gpus all"), (2, "--gpus 2")])
def test_explicit_gpus_fail_early_with_the_diagnosis(gpus: int, flag: str) -> None:
    with pytest.raises(NoGpuRuntime) as caught:
        plan_gpus(Engine({"Runtimes": RUNC}), "img:1", CUDA, gpus, [])
    message = str(caught.value)
    assert message.startswith(f"--image img:1 {flag}: this host's Docker has no NVIDIA runtime")
    assert REFUSED in message and f"drop {flag}" in message and caught.value.exit_code == 3


@pytest.mark.parametrize(("lock", "gpus"), [(LOCK, None), (CUDA, 0), (replace(LOCK, backend="rocm"), None)])
def test_no_nvidia_request_asks_the_engine_nothing(lock: Any, gpus: int | None) -> None:
    engine = Engine({})  # info() is not even read: an empty answer would fail the trial
    plan = plan_gpus(engine, "img:1", lock, gpus, [])
    assert plan.fallback is None and engine.created == []


def report_dir(out: Path, ok: bool) -> Path:
    run = out / "20260101-000000-abc"
    run.mkdir(parents=True)
    failure = None if ok else {"stage": "container", "error": "/dev/nvidiactl is missing in the container"}
    stages = [] if ok else [{"stage": "container", "status": "failed", "error": failure and failure["error"]}]
    report = {"ok": ok, "first_failure": failure, "stages": stages}
    (run / "report.json").write_text(json.dumps(report))
    return run


@pytest.mark.parametrize("inside", [0, 1])
def test_the_cli_never_passes_a_run_without_gpus(
    inside: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even when the validator inside passed (here: only stages that need no GPU), the exit is 1; the
    last line names the first failure and what to run on the rented machine; --json is not ok."""
    run = report_dir(tmp_path / "runs", ok=inside == 0)
    support = GpuSupport(("runc",), (), REFUSED)

    def fake(tag: str, **kwargs: Any) -> image_run.ImageRun:
        return image_run.ImageRun(inside, (run,), 1.0, CUDA, support)

    monkeypatch.setattr(image_run, "validate_image", fake)
    result = CliRunner().invoke(
        cli, ["validate", "--image", "img:1", "--out", str(tmp_path / "runs"), "--json"]
    )
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    assert data["ok"] is False and data["findings"][0]["code"] == "E-NO-GPU-RUNTIME"
    assert "on the rented machine: `envbuild validate --image img:1`" in data["findings"][0]["message"]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("envbuild: not a pass: no GPU was passed to the container")
    assert last.endswith(
        "On the rented machine: `envbuild validate --image img:1` with the NVIDIA container toolkit "
        "installed (`--gpus all`)"
    )
    assert ("first failure: container: /dev/nvidiactl is missing" in last) is (inside == 1)
    assert first_failure(tmp_path / "nowhere") is None


def test_the_engines_words_reach_the_diagnosis_with_escapes_shown() -> None:
    """The rented machine's engine names its runtimes and words its refusal: an ESC in either is shown
    as an escape, not sent to the terminal."""
    support = GpuSupport(runtimes=("runc\x1b]0;owned\x07",), cdi_devices=(), refusal="no\x1b[2J gpu")
    said = support.diagnosis()
    assert "\x1b" not in said and "\x07" not in said
    assert "runc\\x1b]0;owned\\x07" in said and "no\\x1b[2J gpu" in said
