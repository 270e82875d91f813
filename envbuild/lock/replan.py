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
from envbuild.lock.torch_default import defaulted, relaxed_lock, yielded_finding, yielded_origin
from envbuild.models import CheckResult, Finding, Plan
from envbuild.plan.resolved import ResolvedTorch, ServedTorch, torch_from
from envbuild.render.lockfile import declared_lines, make_lock

PlanFn = Callable[..., CheckResult]
# Plan errors after which the pins cannot resolve (a build nobody serves, a torch nobody knows).
NO_RESOLUTION = frozenset(
    {"E-VARIANT-NOT-SERVED", "E-VARIANT-UNAVAILABLE", "E-TORCH-UNKNOWN", "E-RESOLVED-BUILD"}
)  # envbuild.plan.check with the profile bound: served=, resolved=, ...


@dataclass(frozen=True)
class Replanned:
    before: CheckResult  # the plan before resolution
    result: CheckResult  # the plan derived from the resolved set, with every finding (plan + resolution)
    resolved: Resolved | None  # None when the plan could not be resolved (its findings say why)
    served: ServedTorch
    torch: ResolvedTorch | None  # the torch the resolved set installs

    forced: bool = False  # the plan's errors before resolution were accepted (render --force)
    # where the torch pin came from, when the plan alone cannot say (the default torch yielded)
    torch_origin: str | None = None

    @property
    def changes(self) -> list[str]:
        """What resolution changed in the plan (:func:`plan_changes`)."""
        return plan_changes(self.before.plan, self.result.plan)

    @property
    def ok(self) -> bool:
        if self.resolved is None or not self.resolved.ok:
            return False
        known = (
            {(f.code, f.message) for f in self.before.findings if f.severity == "error"}
            if self.forced
            else set()
        )
        return not any(
            f.severity == "error" and (f.code, f.message) not in known for f in self.result.findings
        )


def _resolver_input(plan: Plan) -> tuple[object, ...]:
    """What the resolution depends on: the declared lines, the indexes, and whether the builder stage's CUDA
    compiler is locked too (its release follows the resolved set, not the plan)."""
    lines = tuple((line.kind, line.text) for line in declared_lines(plan))  # not their provenance
    return (lines, plan.index_urls, plan.builder_toolkit is not None)


def _builder(plan: Plan) -> str:
    if plan.builder_image:
        return plan.builder_image
    return "the base image, CUDA's compiler from the package index" if plan.builder_toolkit else "-"


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
        ("probe ops", " ".join(before.probe_ops) or "-", " ".join(after.probe_ops) or "-"),
        ("builder", _builder(before), _builder(after)),
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
    forced: bool = False,
) -> Replanned:
    """Resolve the plan of ``plan_fn`` and derive it again from the resolved set (see the module doc).

    ``forced``: the bundle was rendered with ``--force``, so the error findings its plan had before
    resolution do not stop the resolution (new ones do)."""
    index_urls, find_links = tuple(index_urls), tuple(find_links)
    before = plan_fn(strict_torch=False)
    first_lock = make_lock(before.plan, constraint_files=constraint_files)
    sources, _ = sources_for(first_lock, index_urls, find_links)
    served = served_torch(sources, Target.of(first_lock))
    current = plan_fn(served=served)

    def blocked(result: CheckResult) -> bool:
        """An error that makes resolving the plan's pins meaningless (the resolver would only report a
        conflict); other errors are reported beside the resolution's findings."""
        return any(f.code in NO_RESOLUTION for f in result.findings)

    if blocked(current):
        return Replanned(before, _with(current, ()), None, served, None, forced)

    origin: str | None = None
    yielded: list[Finding] = []

    def run(plan: Plan) -> Resolved:
        lock = make_lock(plan, constraint_files=constraint_files, torch_origin=origin)
        return resolve(
            lock, bundle=bundle, index_urls=index_urls, find_links=find_links, toolkit=plan.builder_toolkit
        )

    resolved = run(current.plan)
    default = current.plan.torch_version
    if not resolved.ok and default is not None and defaulted(current):
        # the default torch is a preference: let the resolver choose within the catalog's releases
        lock = relaxed_lock(make_lock(current.plan, constraint_files=constraint_files), current.plan)
        wide = resolve(lock, bundle=bundle, index_urls=index_urls, find_links=find_links)
        chosen = torch_from(wide.distributions) if wide.ok else None
        if chosen is not None and chosen.version != default:
            locked = {d.name: d.version for d in wide.distributions}
            yielded.append(yielded_finding(default, chosen, resolved.findings, locked))
            origin = yielded_origin(default, chosen)
            resolved = wide
    if not resolved.ok:
        return Replanned(before, _with(current, resolved.findings), resolved, served, None, forced)
    torch = torch_from(resolved.distributions)
    if torch is not None:
        derived = plan_fn(served=served, resolved=torch)
        if not blocked(derived) and _resolver_input(derived.plan) != _resolver_input(current.plan):
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
                return Replanned(before, _with(derived, [unstable]), again, served, torch, forced, origin)
            resolved = again
        current = derived
    extra = [*yielded, *_served_not_unconfirmed(current, resolved)]
    extra += resolved.findings
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
        image = sum(1 for d in resolved.distributions if d.in_image)
        builder = len(resolved.distributions) - image
        extra.append(
            Finding(
                severity="info",
                code="I-RESOLVED",
                message=(
                    f"{image} distributions resolve for {resolved.resolution.platform} "
                    f"(CPython {resolved.resolution.python_version}) with {resolved.resolution.resolver}"
                    + (
                        f", and {builder} for the builder stage only (build dependencies, CUDA's compiler)"
                        if builder
                        else ""
                    )
                ),
            )
        )
    result = CheckResult(
        plan=current.plan,
        findings=tuple(f for f in current.findings if not (f.code == "W-TORCH-UNCONFIRMED" and resolved.ok)),
    )
    return Replanned(before, _with(result, extra), resolved, served, torch, forced, origin)


def _served_not_unconfirmed(result: CheckResult, resolved: Resolved) -> list[Finding]:
    """W-TORCH-UNCONFIRMED says the catalog has not confirmed which wheels exist for the planned torch;
    once the resolution has locked its wheel, say where it came from instead (and never name an index
    that the lock did not use)."""
    if not resolved.ok or not any(f.code == "W-TORCH-UNCONFIRMED" for f in result.findings):
        return []
    dist = next((d for d in resolved.distributions if d.name == "torch" and d.in_image), None)
    if dist is None or not dist.files:
        return []
    return [
        Finding(
            severity="info",
            code="I-TORCH-SERVED",
            message=(
                f"torch {dist.version}: the catalog has not confirmed its wheels, but the resolution locked "
                f"{dist.files[0].filename} from {dist.index or 'the indexes given'} (sha256 "
                f"{dist.files[0].sha256[:12]}...)"
            ),
        )
    ]
