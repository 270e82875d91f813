"""The stage list and its dependency graph (the run itself: :mod:`envbuild.validate.ladder`).

Each stage gathers facts (a probe in the interpreter under test, or the vendor tools) and hands them
to a pure decision function.

Two relations between stages:

- ``needs``: the stages that come first.  ``--stages`` adds them, and without ``keep_going`` the run
  stops at the first failure: every later stage is ``aborted``, naming the failed prerequisite or the
  stage that stopped the run (the first error and the stage reached say where it stopped).
- ``requires``: the facts a stage cannot run without (:data:`FACTS`).  With ``keep_going`` a stage is
  aborted only when one of them is known to be missing: the interpreter under test does not start
  (nothing can run), torch does not import (no torch stage can run), torch sees no GPU (no device
  stage can run).  A failed verdict (a Python version the lock does not declare, a package
  difference, a wrong driver) hides nothing: every stage that can still tell the renter something
  runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from envbuild.errors import UsageError, choices


@dataclass(frozen=True)
class StageSpec:
    name: str
    needs: tuple[str, ...]
    timeout_s: float
    what: str
    requires: tuple[str, ...] = ("python",)


# The facts a stage may require, and what their absence means to a renter.
FACTS: dict[str, str] = {
    "python": "the interpreter under test did not run a probe",
    "torch": "torch does not import in the interpreter under test",
    "devices": "torch sees no GPU",  # always there for a CPU lock
}
_TORCH_WORK = ("python", "torch", "devices")

STAGES: tuple[StageSpec, ...] = (
    StageSpec("interpreter", (), 60, "the interpreter and venv actually used", ()),
    StageSpec("os", (), 60, "distribution, version, glibc"),
    StageSpec(
        "container",
        (),
        30,
        "/dev/shm, device nodes the user can open, ulimits, cgroup memory and CPU limits",
        (),
    ),
    StageSpec("packages", ("interpreter",), 120, "installed distributions vs the lock, broken requirements"),
    StageSpec("accelerator", ("packages",), 180, "torch build variant, GPU visibility, driver"),
    StageSpec(
        "blender",
        ("accelerator",),
        600,
        "Blender's version, Cycles' devices per type, a fixed render on each declared device vs the CPU",
    ),
    StageSpec(
        "devices",
        ("accelerator",),
        180,
        "every device: name, memory, arch coverage, smi agreement",
        _TORCH_WORK,
    ),
    StageSpec("compute", ("devices",), 300, "matmul on each device vs a float64 reference", _TORCH_WORK),
    StageSpec(
        "extensions", ("compute",), 1200, "compile and run custom ops, extension smoke tests", _TORCH_WORK
    ),
    StageSpec(
        "memory", ("devices",), 300, "allocate the declared need on each device", ("python", "devices")
    ),
    StageSpec("checkpoint", ("compute",), 300, "save, resume in a fresh process, compare", _TORCH_WORK),
    StageSpec(
        "performance",
        ("compute",),
        600,  # the budget (--perf-budget, 60 s by default) plus the processes' start-up
        "matmul TFLOP/s per dtype, memory, host and peer bandwidth, an all-reduce sweep, vs the datasheet",
        _TORCH_WORK,
    ),
    StageSpec("checks", ("packages",), 0, "the profile's own checks (each has its own timeout)"),
)
STAGE_NAMES: tuple[str, ...] = tuple(s.name for s in STAGES)
SPECS = {s.name: s for s in STAGES}

TORCH_STAGES = frozenset({"devices", "compute", "extensions", "memory", "checkpoint", "performance"})
# Stages in the default ladder of a GPU lock only; a CPU lock runs them when --stages names them.
GPU_DEFAULT_ONLY = frozenset({"performance"})
PERF_BUDGET_S = 60.0  # the performance stage's default time budget (--perf-budget)


def select_stages(names: Iterable[str] | None) -> list[str]:
    """The requested stages plus their prerequisites, in dependency order."""
    if names is None:
        return list(STAGE_NAMES)
    wanted: set[str] = set()
    pending = [n.strip() for n in names if n.strip()]
    if not pending:
        raise UsageError(f"--stages: no stage named (valid: {choices(STAGE_NAMES)})")
    for name in pending:
        if name not in SPECS:
            raise UsageError(f"--stages: unknown stage {name!r} (valid: {choices(STAGE_NAMES)})")
    while pending:
        name = pending.pop()
        if name not in wanted:
            wanted.add(name)
            pending.extend(SPECS[name].needs)
    return [n for n in STAGE_NAMES if n in wanted]


def skip_reasons(selected: Iterable[str], skip: Iterable[str]) -> dict[str, str]:
    """The selected stages that ``--skip`` leaves out, each with why: it was named, or it ``needs`` a
    skipped stage (transitively: ``--skip compute`` skips extensions and checkpoint too)."""
    named = {n.strip() for n in skip if n.strip()}
    for name in sorted(named):
        if name not in SPECS:
            raise UsageError(f"--skip: unknown stage {name!r} (valid: {choices(STAGE_NAMES)})")
    root: dict[str, str] = {}  # skipped stage -> the --skip stage it follows from
    reasons: dict[str, str] = {}
    for spec in STAGES:  # in dependency order: a stage's needs come before it
        if spec.name in named:
            root[spec.name], reasons[spec.name] = spec.name, "skipped by --skip"
            continue
        gone = next((d for d in spec.needs if d in root), None)
        if gone is not None:
            root[spec.name] = root[gone]
            how = "skipped by --skip" if gone == root[gone] else f"skipped because of --skip {root[gone]}"
            reasons[spec.name] = f"needs stage '{gone}', {how}"
    wanted = set(selected)
    return {name: why for name, why in reasons.items() if name in wanted}
