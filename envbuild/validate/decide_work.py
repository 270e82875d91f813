"""Pure decisions for the stages that run real work: compute, extensions, memory, checkpoint."""

from __future__ import annotations

import errno
import math
import os
from typing import Any

from envbuild.models import Lock
from envbuild.report.model import StageResult
from envbuild.validate.decide import result, skipped

GIB = 1024**3
MEMORY_MARGIN = 0.05
GPU_CHECKPOINT_TOLERANCE = 1e-4


def _numbers(check: dict[str, Any]) -> tuple[float, float] | None:
    """(relative error, tolerance) when the probe reported both as numbers."""
    error, tolerance = check.get("rel_error"), check.get("tolerance")
    if isinstance(error, (int, float)) and isinstance(tolerance, (int, float)):
        return float(error), float(tolerance)
    return None


def decide_compute(facts: dict[str, Any]) -> StageResult:
    checks: list[dict[str, Any]] = list(facts.get("checks", []))
    if not checks:
        return result("compute", "the compute probe ran no matrix product", None, **facts)
    for c in checks:
        numbers = _numbers(c)
        # The probe's "ok" is re-checked against its own numbers, so a garbled verdict cannot pass.
        if c.get("ok") and c.get("finite") and numbers is not None and numbers[0] <= numbers[1]:
            continue
        where = f"{c.get('device')} {c.get('dtype')} matmul ({c.get('size')}x{c.get('size')})"
        if c.get("error"):
            error = f"{where} failed: {c['error']}"
        elif not c.get("finite"):
            error = f"{where} produced non-finite values"
        elif numbers is None:
            error = f"{where}: the probe reported no relative error and tolerance"
        else:
            error = f"{where}: relative error {numbers[0]:.3g} exceeds {numbers[1]:g}"
        return result(
            "compute", error, "the device computes wrong numbers: report the card to the provider", **facts
        )
    return result("compute", **facts)


def _part_problem(p: dict[str, Any]) -> str | None:
    """Why a part fails, from its raw facts: the probe's own "passed" must agree with its numbers."""
    name = p.get("name", "?")
    if p.get("status") == "failed":
        return str(p.get("error") or f"{name} failed")
    if p.get("status") != "passed":
        return None
    err, tol = p.get("max_error"), p.get("tolerance")
    if isinstance(err, (int, float)) and isinstance(tol, (int, float)):
        if math.isfinite(err) and err <= tol:
            return None
        return f"{name}: max error {err:g} exceeds its tolerance {tol:g} (the probe reported it passed)"
    if p.get("smoke"):
        return None  # numbers within tolerance, or an import-only smoke test that says so
    return f"{name}: the probe reported it passed without a max error and tolerance to check"


def decide_extensions(lock: Lock, facts: dict[str, Any]) -> StageResult:
    """Each part re-checked from its numbers: a "passed" part must carry max_error <= tolerance."""
    parts: list[dict[str, Any]] = list(facts.get("parts", []))
    for p in parts:
        problem = _part_problem(p)
        if problem is not None:
            hint = p.get("hint") if p.get("status") == "failed" else "the extension computes wrong numbers"
            return result("extensions", problem, hint, parts=parts)
    if parts and all(p.get("status") == "skipped" for p in parts):
        reasons = "; ".join(f"{p['name']}: {p.get('reason')}" for p in parts)
        return skipped("extensions", reasons, parts=parts)
    if not parts:
        return skipped("extensions", "nothing to check: no custom op and no extension packages", parts=parts)
    return result("extensions", parts=parts)


def memory_need_bytes(lock: Lock) -> int | None:
    if lock.gpu_memory_gib is None:
        return None
    return int(lock.gpu_memory_gib * (1 + MEMORY_MARGIN) * GIB)


def decide_memory_cpu(lock: Lock, available: int | None) -> StageResult:
    need = memory_need_bytes(lock)
    if need is None:
        return skipped("memory", "the lock declares no memory need (resources.gpu_memory_gib)")
    facts = {"need_bytes": need, "host_available_bytes": available, "margin": MEMORY_MARGIN}
    if available is None:
        return result("memory", "cannot read MemAvailable from /proc/meminfo", None, **facts)
    if available < need:
        return result(
            "memory",
            f"host has {available / GIB:.1f} GiB available, the job needs {need / GIB:.1f} GiB (with margin)",
            "free memory or choose a machine with more RAM",
            **facts,
        )
    return result("memory", **facts)


def _device_problem(d: dict[str, Any], need: int | None) -> str | None:
    """Why a device fails, from its raw facts (bytes allocated and read back), not the probe's verdict."""
    if not d.get("allocated"):
        need_gib = float(d.get("need_bytes", 0)) / GIB
        free = float(d.get("free_bytes", 0)) / GIB
        total = float(d.get("total_bytes", 0)) / GIB
        cause = f": {d['error']}" if d.get("error") else ""
        return f"cannot allocate {need_gib:.1f} GiB (free {free:.1f} of {total:.1f} GiB){cause}"
    got = d.get("allocated_bytes")
    wanted = need if need is not None else d.get("need_bytes")
    if not isinstance(got, int) or not isinstance(wanted, int) or got < wanted:
        return f"allocated {got} bytes, fewer than the {wanted} bytes the lock needs (with margin)"
    samples, pattern = d.get("readback"), d.get("pattern")
    if not isinstance(samples, list) or not samples or any(s != pattern for s in samples):
        return f"the memory read back {samples} where {pattern} was written"
    return None


def decide_memory_gpu(lock: Lock, facts: dict[str, Any]) -> StageResult:
    """Every device must hold the lock's need: re-checked from the bytes allocated and read back."""
    devices: list[dict[str, Any]] = list(facts.get("devices", []))
    shown = {"devices": devices, "margin": MEMORY_MARGIN}
    if not devices:
        return result("memory", "no device to allocate on", None, **shown)
    need = memory_need_bytes(lock)
    for d in devices:
        problem = _device_problem(d, need)
        if problem is not None:
            return result(
                "memory",
                f"device {d.get('index')}: {problem}",
                "another process holds memory (nvidia-smi / amd-smi), or the card is smaller than declared",
                **shown,
            )
    return result("memory", **shown)


# What to do about a checkpoint folder that refuses a write, by errno; the meaning is os.strerror's.
_FOLDER_FIX = {
    "EROFS": "it is on a read-only file system: point validate.checkpoint_dir (or --workdir) elsewhere",
    "ENOSPC": "its file system is full: free space there, or point validate.checkpoint_dir elsewhere",
    "EDQUOT": "the user's disk quota is used up: free space, or point validate.checkpoint_dir elsewhere",
    "EACCES": "this user (uid {uid}) may not write there: fix its owner or mode, or choose another folder",
    "EPERM": "this user (uid {uid}) may not write there: fix its owner or mode, or choose another folder",
}


def checkpoint_folder_failed(folder: str, code: int | str, path: str, doing: str, uid: int) -> StageResult:
    """The checkpoint stage could not use ``folder``: the error names it, the errno and its meaning."""
    name = code if isinstance(code, str) else errno.errorcode.get(code, str(code))
    number = getattr(errno, name, None)
    meaning = os.strerror(number) if isinstance(number, int) else name
    fix = _FOLDER_FIX.get(name, "choose a checkpoint folder this user can create files in").format(uid=uid)
    return result(
        "checkpoint",
        f"checkpoint folder {folder}: cannot {doing} {path}: {meaning} ({name})",
        fix,
        folder=folder,
        errno=name,
        path=path,
    )


def decide_checkpoint(
    save: dict[str, Any], resume: dict[str, Any], device: str, folder: str = "", uid: int = -1
) -> StageResult:
    for data, doing in ((save, "write"), (resume, "read back")):
        err = data.get("os_error")
        if isinstance(err, dict):
            return checkpoint_folder_failed(folder, str(err.get("errno")), str(err.get("path")), doing, uid)
    facts = {
        "device": device,
        "folder": folder,
        "path": save.get("path"),
        "size_bytes": save.get("size_bytes"),
        "write_seconds": save.get("write_seconds"),
        "read_seconds": resume.get("read_seconds"),
        "resumed_from_step": resume.get("resumed_from_step"),
        "steps": resume.get("steps"),
        "bitwise_equal": resume.get("bitwise_equal"),
        "max_abs_diff": resume.get("max_abs_diff"),
    }
    if device == "cpu":
        if resume.get("bitwise_equal") is not True:
            return result(
                "checkpoint",
                f"resumed run differs from the uninterrupted run (max |diff| {resume.get('max_abs_diff')})",
                "the checkpoint misses state (optimizer, scheduler, RNG), or the run is not deterministic",
                **facts,
            )
        return result("checkpoint", **facts)
    diff = resume.get("max_abs_diff")
    if not isinstance(diff, (int, float)) or diff > GPU_CHECKPOINT_TOLERANCE:
        return result(
            "checkpoint",
            f"resumed run differs from the uninterrupted run on {device}: max |diff| {diff} > "
            f"{GPU_CHECKPOINT_TOLERANCE:g}",
            "the checkpoint misses state (optimizer, scheduler, RNG)",
            **facts,
        )
    return result("checkpoint", **facts)
