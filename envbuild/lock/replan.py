"""The resolved set decides the plan: derive the plan again from what will actually be installed.

Used by ``envbuild check --resolve`` and ``envbuild lock``::

    plan before resolution  (check: the profile's declarations, the catalog)
      -> which torch builds the indexes serve      (envbuild.lock.served: a local tag, or the default build)
      -> the plan with the served builds           (pins +cuNNN, or without a local tag; E-VARIANT-NOT-SERVED)
      -> resolution                                (uv, every distribution with its hashes)
      -> the torch the resolved set installs       (envbuild.plan.resolved.torch_from)
      -> the plan derived again                    (torch version and build, CUDA/ROCm, base image, driver)
      -> resolved again when that changed the resolver's input (and the torch must not move)

A bare ``torch`` line, or a dependency's pin (vllm pins torch), can no longer send a renter to a machine
whose driver cannot run the torch that is installed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from envbuild.lock.resolve import Resolved, resolve, sources_for
from envbuild.lock.served import served_torch
from envbuild.lock.target import Target
from envbuild.models import CheckResult, Finding, Plan
from envbuild.plan.resolved import ResolvedTorch, ServedTorch, torch_from
from envbuild.render.lockfile import declared_lines, make_lock

PlanFn = Callable[..., CheckResult]  # envbuild.plan.check with the profile bound: served=, resolved=, ...


@dataclass(frozen=True)
class Replanned:
    before: CheckResult  # the plan before resolution
    result: CheckResult  # the plan derived from the resolved set, with every finding (plan + resolution)
    resolved: Resolved | None  # None when the plan could not be resolved (its findings say why)
    served: ServedTorch
    torch: ResolvedTorch | None  # the torch the resolved set installs

    @property
    def ok(self) -> bool:
        return self.result.ok and self.resolved is not None and self.resolved.ok


def _resolver_input(plan: Plan) -> tuple[object, ...]:
    return (declared_lines(plan), plan.index_urls)


def _build(torch: ResolvedTorch | None) -> tuple[str, str | None, str] | None:
    return None if torch is None else (torch.version, torch.local, torch.variant)


def _torch_text(plan: Plan) -> str:
    if not plan.torch_version:
        return "not declared"
    return f"{plan.torch_version} ({plan.torch_variant} build)" if plan.torch_variant else plan.torch_version


def plan_changes(before: Plan, after: Plan) -> list[str]:
    """What resolution changed in the plan, each as ``what: before -> after``."""
    rows = [
        ("torch", _torch_text(before), _torch_text(after)),
        (
            after.backend.upper() if after.backend != "cpu" else "accelerator",
            before.accelerator_version or "-",
            after.accelerator_version or "-",
        ),
        ("base image", before.base_image, after.base_image),
        ("min driver", before.min_driver or "-", after.min_driver or "-"),
        ("arch list", " ".join(before.torch_arch_list) or "-", " ".join(after.torch_arch_list) or "-"),
        ("compiles", "yes" if before.compiles else "no", "yes" if after.compiles else "no"),
    ]
    return [f"{what}: {a} -> {b}" for what, a, b in rows if a != b]


def _with(result: CheckResult, extra: Iterable[Finding]) -> CheckResult:
    kept = tuple(f for f in result.findings if f.code != "I-NOT-RESOLVED")
    return CheckResult(plan=result.plan, findings=(*kept, *extra))


def resolve_and_replan(
    plan_fn: PlanFn,
    *,
    bundle: Path | None = None,
    index_urls: Iterable[str] = (),
    find_links: Iterable[str] = (),
    constraint_files: tuple[str, ...] | None = None,
) -> Replanned:
    """Resolve the plan of ``plan_fn`` and derive it again from the resolved set (see the module doc)."""
    index_urls, find_links = tuple(index_urls), tuple(find_links)
    before = plan_fn(strict_torch=False)
    first_lock = make_lock(before.plan, constraint_files=constraint_files)
    sources, _ = sources_for(first_lock, index_urls, find_links)
    served = served_torch(sources, Target.of(first_lock))
    current = plan_fn(served=served)
    if not current.ok:
        return Replanned(before, _with(current, ()), None, served, None)

    def run(plan: Plan) -> Resolved:
        lock = make_lock(plan, constraint_files=constraint_files)
        return resolve(lock, bundle=bundle, index_urls=index_urls, find_links=find_links)

    resolved = run(current.plan)
    if not resolved.ok:
        return Replanned(before, _with(current, resolved.findings), resolved, served, None)
    torch = torch_from(resolved.distributions)
    if torch is not None:
        derived = plan_fn(served=served, resolved=torch)
        if derived.ok and _resolver_input(derived.plan) != _resolver_input(current.plan):
            again = run(derived.plan)
            moved = torch_from(again.distributions) if again.ok else torch
            if _build(moved) != _build(torch):
                unstable = Finding(
                    severity="error",
                    code="E-RESOLVED-UNSTABLE",
                    message=(
                        f"the resolved set installs {torch.describe()}, but pinning it moves the resolution "
                        f"to {moved.describe() if moved else 'no torch'}; pin torch in the profile"
                    ),
                )
                return Replanned(before, _with(derived, [unstable]), again, served, torch)
            resolved = again
        current = derived
    extra = list(resolved.findings)
    changes = plan_changes(before.plan, current.plan)
    if changes:
        extra.append(
            Finding(
                severity="info",
                code="I-PLAN-RESOLVED",
                message="the resolved set decides the plan: " + "; ".join(changes),
            )
        )
    if resolved.ok:
        extra.append(
            Finding(
                severity="info",
                code="I-RESOLVED",
                message=(
                    f"{len(resolved.distributions)} distributions resolve for {resolved.resolution.platform} "
                    f"(CPython {resolved.resolution.python_version}) with {resolved.resolution.resolver}"
                ),
            )
        )
    return Replanned(before, _with(current, extra), resolved, served, torch)
