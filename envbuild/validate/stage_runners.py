"""Each stage's own work: gather its facts (a probe, the vendor tools, this process) and decide.

:data:`RUNNERS` maps a stage's name to its function; the ladder (:mod:`envbuild.validate.ladder`) runs
them in order.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from envbuild.hardware.tools import tool_name
from envbuild.models import CheckSpec
from envbuild.report.model import StageResult
from envbuild.resources import cache_dir
from envbuild.validate import (
    blender,
    checks,
    container,
    container_facts,
    decide,
    decide_work,
    gpu,
    hardware_stage,
    interp,
)
from envbuild.validate.host import mem_available_bytes
from envbuild.validate.performance_stage import run_performance
from envbuild.validate.stage_context import ProbeFailed, StageContext, probe, probe_data


def _interpreter(ctx: StageContext) -> StageResult:
    data = probe(ctx, "interpreter", "interpreter", {})
    return decide.decide_interpreter(ctx.lock, data, ctx.python_chosen_by)


def _os(ctx: StageContext) -> StageResult:
    data = probe(ctx, "os", "os", {})
    if data.get("os_release"):
        ctx.raw["os-release"] = str(data["os_release"])
    return decide.decide_os(ctx.lock, data)


def _container(ctx: StageContext) -> StageResult:
    # read by the validator's own process: same user, limits and devices as the job in this container
    return container.decide_container(ctx.lock, container_facts.collect(ctx.lock))


def _packages(ctx: StageContext) -> StageResult:
    data = probe(ctx, "packages", "packages", {})
    names, installed = data.get("names", {}), data.get("installed", {})
    ctx.raw["pip-freeze.txt"] = "".join(f"{names.get(k, k)}=={v}\n" for k, v in sorted(installed.items()))
    # data["requires"] (the probe's dependency graph) tells a broken distribution the lock needs from
    # one it does not
    return decide.decide_packages(ctx.lock, data, ctx.python)


def _accelerator(ctx: StageContext) -> StageResult:
    if ctx.lock.torch_version is None:
        tools = ctx.gpu_tools()
        count = tools.nvml_device_count or max((len(r.devices) for r in tools.readings), default=0)
        reading = next((r for r in tools.readings if r.driver_version), None)
        driver = tools.nvml_driver or (reading.driver_version if reading else None)
        source = "NVML" if tools.nvml_driver else (tool_name(reading.source) if reading else None)
        return gpu.decide_accelerator_without_torch(ctx.lock, count, driver, source)
    data = probe(ctx, "accelerator", "accelerator", {}, warm=True)
    ctx.device_count = int(data.get("device_count") or 0)
    env = data.get("env") or {}
    ctx.restricted = any(
        env.get(v) for v in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
    )
    tools = ctx.gpu_tools()
    driver, source = tools.nvml_driver, "NVML" if tools.nvml_driver else None
    if driver is None:
        reading = next((r for r in tools.readings if r.driver_version), None)
        driver, source = (reading.driver_version, tool_name(reading.source)) if reading else (None, None)
    res = gpu.decide_accelerator(ctx.lock, data, driver, source)
    if tools.errors:
        res = replace(res, facts={**res.facts, "tool_errors": tools.errors})
    return res


def _devices(ctx: StageContext) -> StageResult:
    if not ctx.gpu:
        return gpu.decide_devices(ctx.lock, {}, [])
    hw = _hardware(ctx)
    if ctx.lock.torch_version is None:
        return hardware_stage.hardware_only(ctx.lock, hw)
    data = probe(ctx, "devices", "devices", {}, warm=True)
    res = gpu.decide_devices(ctx.lock, data, ctx.gpu_tools().readings, ctx.restricted)
    return hardware_stage.with_hardware(res, hw)


def _hardware(ctx: StageContext) -> hardware_stage.HardwareJudgement:
    """The machine's hardware read live and judged by the rules of ``check --smi`` (issue 26); the
    reading becomes report.json's ``hardware`` section."""
    facts = hardware_stage.read_live(ctx.lock.backend)
    pids = hardware_stage.own_pids()
    hw = hardware_stage.judge_live(ctx.lock, facts, pids=pids, in_container=container_facts.in_container())
    ctx.hardware = hw.section()
    return hw


def _compute(ctx: StageContext) -> StageResult:
    data = probe(ctx, "compute", "compute", {"devices": ctx.device_names()}, warm=True)
    return decide_work.decide_compute(data)


def extension_cache_dir() -> str | None:
    """Where the extensions probe keeps the ops it built (torch's own build folders, one per hash of the
    build's inputs: see probes/probe_extensions.py); None: no home folder, every run builds afresh."""
    try:
        return str(cache_dir() / "torch-extensions")
    except RuntimeError:
        return None


def _extensions(ctx: StageContext) -> StageResult:
    cache = extension_cache_dir()
    lock = ctx.lock
    args = {
        "backend": lock.backend,
        "compile": lock.compile_extensions,
        "ops": list(lock.probe_ops),
        "ops_dir": lock.probe_ops_dir,
        "torch_compile": lock.torch_compile,
        "extensions": list(lock.extensions),
        "cache_dir": cache,
    }
    # In the image the ops were built with it, and the warm worker (torch already imported) loads and
    # runs them; elsewhere, a second run on this machine finds them in the cache.  A build, torch.compile
    # or an extension package's smoke test runs in a process of its own, beside the ladder.
    in_image = bool(lock.probe_ops) and (Path(lock.probe_ops_dir) / "ops.json").is_file()
    compiles_here = lock.compile_extensions or (bool(lock.probe_ops) and not in_image)
    why_own = ""
    if lock.extensions:
        why_own = "the lock names extension packages (their smoke tests run apart)"
    elif lock.torch_compile:
        why_own = "validate.torch_compile compiles on arrival"
    elif compiles_here and not (cache and any(Path(cache).glob("envbuild_probe_*/envbuild_probe_*.so"))):
        why_own = "no op is built in the cache yet"  # a first run: no need to wait for the worker
    if not why_own and ctx.use_worker and ctx.worker is not None:
        try:
            data = probe(ctx, "extensions", "extensions", {**args, "cached_only": True}, warm=True)
        except ProbeFailed as exc:
            stop = ctx.cancel.get("extensions")
            if stop is not None and stop.is_set():
                raise  # cancelled: the worker was killed for it
            why_own = f"the warm worker failed: {exc.result.error}"
        else:
            if "needs_build" not in data:
                res = decide_work.decide_extensions(ctx.lock, data)
                return replace(res, facts={**res.facts, "process": "warm worker"})
            why_own = str(data["needs_build"])
    res = decide_work.decide_extensions(ctx.lock, probe(ctx, "extensions", "extensions", args))
    return replace(
        res, facts={**res.facts, "process": "its own", **({"why_own": why_own} if why_own else {})}
    )


def _memory(ctx: StageContext) -> StageResult:
    if not ctx.gpu:
        return decide_work.decide_memory_cpu(ctx.lock, mem_available_bytes())
    need = decide_work.memory_need_bytes(ctx.lock)
    if need is None:
        return decide.skipped(
            "memory", "the lock declares no per-card memory need (resources.gpu_memory_gib)"
        )
    data = probe(ctx, "memory", "memory", {"need_bytes": need}, warm=True)
    return decide_work.decide_memory_gpu(ctx.lock, data)


def _checkpoint(ctx: StageContext) -> StageResult:
    """Save and resume in a fresh subfolder of the lock's checkpoint_dir, created here and removed after
    (with the folders above it this stage created, when empty): the user's files there are never
    touched.  A folder that refuses is an error naming it and the errno's meaning."""
    directory = Path(ctx.lock.checkpoint_dir)
    if not directory.is_absolute():
        directory = ctx.workdir / directory
    device = "cuda:0" if ctx.gpu else "cpu"
    made = [p for p in (directory, *directory.parents) if not p.exists()]  # deepest first
    try:
        directory.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="envbuild-checkpoint-", dir=directory))
    except OSError as exc:
        where = exc.filename or str(directory)
        return decide_work.checkpoint_folder_failed(
            str(directory), exc.errno or 0, str(where), "create a fresh folder in", os.getuid()
        )
    args = {"dir": str(work), "device": device, "steps": 8}
    try:
        # The save runs warm; the resume runs in another process that never trained (only imported
        # torch, started with the run), as a restarted job would.
        save = probe(ctx, "checkpoint", "checkpoint", {**args, "mode": "save"}, cwd=ctx.workdir, warm=True)
        if ctx.use_worker and ctx.resume_worker is not None:
            out = ctx.resume_worker.call(
                "checkpoint", {**args, "mode": "resume"}, ctx.timeout("checkpoint"), ctx.workdir
            )
            resume = probe_data(ctx, "checkpoint", "checkpoint", out)
        else:
            resume = probe(ctx, "checkpoint", "checkpoint", {**args, "mode": "resume"}, cwd=ctx.workdir)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        for parent in made:
            try:
                parent.rmdir()
            except OSError:
                break
    res = decide_work.decide_checkpoint(save, resume, device, str(directory), os.getuid())
    facts = {**res.facts, "work_folder": str(work), "work_folder_removed": not work.exists()}
    return replace(res, facts=facts)


def _blender(ctx: StageContext) -> StageResult:
    if not ctx.lock.blender_version:
        return decide.skipped("blender", "the lock declares no Blender: not applicable")
    out_dir = blender.temp_dir()
    try:
        args = blender.probe_args(ctx.lock, out_dir)
        run = blender.run_blender_probe(ctx.lock, ctx.python, args, ctx.timeout("blender"))
        data = probe_data(ctx, "blender", "blender", run)
        ctx.files.update(blender.collect_pngs(data, out_dir))
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    # the vendor tools only matter for a GPU device Blender does not see
    wants_gpu = any(d != "CPU" for d in ctx.lock.blender_devices)
    return blender.decide_blender(ctx.lock, data, ctx.gpu_tools() if wants_gpu else None)


def check_specs(ctx: StageContext) -> tuple[CheckSpec, ...]:
    """The lock's checks as they run: a bare ``python`` / ``python3`` / ``pythonX.Y`` as argv[0] is
    the interpreter under test."""
    return tuple(replace(c, run=interp.check_argv(c.run, ctx.python)) for c in ctx.lock.checks)


def _checks(ctx: StageContext) -> StageResult:
    env = interp.check_env(ctx.python, os.environ)
    path = env["PATH"]
    res = checks.run_checks(
        check_specs(ctx), ctx.workdir, ctx.timeouts.get("checks"), env=env, cancel=ctx.cancel.get("checks")
    )
    if res.status == "skipped":
        return res
    shown = {**res.facts, "python": ctx.python, "path_first": path.split(os.pathsep)[0]}
    if res.error:
        return replace(res, facts=shown, hint="see the check's output tail in the report (report.md, Checks)")
    return replace(res, facts=shown)


RUNNERS: dict[str, Callable[[StageContext], StageResult]] = {
    "interpreter": _interpreter,
    "os": _os,
    "container": _container,
    "packages": _packages,
    "accelerator": _accelerator,
    "blender": _blender,
    "devices": _devices,
    "compute": _compute,
    "extensions": _extensions,
    "memory": _memory,
    "checkpoint": _checkpoint,
    "performance": run_performance,
    "checks": _checks,
}
