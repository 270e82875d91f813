"""``envbuild lock``: resolve a rendered bundle's full requirement set and pin it with hashes.

The stage between render and build::

    render (declared requirements)  ->  lock (every distribution, its target files, sha256)  ->  fetch/build

Public API: :func:`lock_bundle` (resolve, derive the plan again from the resolved set, and rewrite the
bundle's requirements-rebuild.txt, envbuild.lock.json and the files that follow the plan),
:func:`resolve_plan` (a plan's resolution as declared, writing nothing; ``check --resolve`` uses
:func:`envbuild.lock.replan.resolve_and_replan`).
Nothing here imports torch or docker.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from envbuild.lock.resolve import Resolved, ResolveError, resolve
from envbuild.models import BundleInputs, CheckResult, Finding, Lock, Plan, check_bundle

__all__ = ["LockOutcome", "ResolveError", "Resolved", "lock_bundle", "resolve_plan"]


@dataclass(frozen=True)
class LockOutcome:
    bundle: Path
    resolved: Resolved | None  # None when the plan could not be resolved (see findings)
    lock: Lock | None  # the lock written; None when a finding is an error (nothing written)
    seconds: float
    findings: tuple[Finding, ...] = ()  # the re-derived plan's and the resolution's
    plan: Plan | None = None  # the plan derived from the resolved set (None: the bundle has no inputs)
    changed: tuple[str, ...] = ()  # what resolution changed in the plan ("base image: A -> B")


def _bundle_files(result: CheckResult, inputs: BundleInputs) -> dict[str, bytes]:
    """The files of the bundle that follow the plan (besides the lock and requirements-rebuild.txt)."""
    from envbuild.render import render_dockerfile
    from envbuild.render.readme import render_readme

    files = {
        "Dockerfile": render_dockerfile(result.plan, inputs.command),
        "README.md": render_readme(result, inputs.command),
    }
    if inputs.bake:
        from envbuild.render.bake import render_bake

        files["docker-bake.hcl"] = render_bake(result, inputs.command)
    return {name: text.encode("utf-8") for name, text in files.items()}


def lock_bundle(
    bundle: Path,
    *,
    index_urls: Iterable[str] = (),
    find_links: Iterable[str] = (),
    say: Callable[[str], None] = lambda _: None,
) -> LockOutcome:
    """Resolve ``bundle``, derive its plan again from the resolved set and, when no finding is an error,
    rewrite every file that depends on it (requirements-rebuild.txt, envbuild.lock.json, Dockerfile,
    README.md, docker-bake.hcl), the lock last."""
    from envbuild.lock.replan import resolve_and_replan
    from envbuild.lock.write import write_locked
    from envbuild.render.inputs import check_inputs, read_inputs
    from envbuild.render.lockfile import make_lock

    started = time.monotonic()
    lock = check_bundle(bundle)
    say(f"resolving {bundle} for CPython {lock.python_version} on {lock.os}")
    inputs = read_inputs(bundle)
    if inputs is None:  # rendered before envbuild.inputs.json: resolve as declared, the plan as rendered
        resolved = resolve(lock, bundle=bundle, index_urls=index_urls, find_links=find_links)
        note = Finding(
            severity="warning",
            code="W-PLAN-NOT-REDERIVED",
            message=(
                "the bundle has no envbuild.inputs.json (rendered by an older envbuild), so its plan (CUDA, "
                "base image, driver) was not derived again from the resolved set; render it again, then lock"
            ),
        )
        findings = (*resolved.findings, note)
        written = write_locked(bundle, lock, resolved) if resolved.ok else None
        return LockOutcome(bundle, resolved, written, time.monotonic() - started, findings)
    replanned = resolve_and_replan(
        lambda **kw: check_inputs(inputs, **kw),
        bundle=bundle,
        index_urls=index_urls,
        find_links=find_links,
        constraint_files=lock.constraint_files,
        forced="--force" in inputs.command.split(),
    )
    result = replanned.result
    changed = tuple(replanned.changes)
    if not replanned.ok or replanned.resolved is None:
        return LockOutcome(
            bundle,
            replanned.resolved,
            None,
            time.monotonic() - started,
            result.findings,
            result.plan,
            changed,
        )
    new_lock = make_lock(
        result.plan, constraint_files=lock.constraint_files, torch_origin=replanned.torch_origin
    )
    if (lock.blender_version, lock.blender_source) == (new_lock.blender_version, new_lock.blender_source):
        new_lock = replace(new_lock, blender_sha256=lock.blender_sha256)  # recorded by a fetch: kept
    written = write_locked(bundle, new_lock, replanned.resolved, extra=_bundle_files(result, inputs))
    return LockOutcome(
        bundle, replanned.resolved, written, time.monotonic() - started, result.findings, result.plan, changed
    )


def resolve_plan(plan: Plan, *, index_urls: Iterable[str] = (), find_links: Iterable[str] = ()) -> Resolved:
    """Resolve a checked plan as `envbuild lock` would resolve its bundle; nothing is written."""
    from envbuild.render.lockfile import make_lock

    return resolve(
        make_lock(plan),
        bundle=None,
        index_urls=index_urls,
        find_links=find_links,
        toolkit=plan.builder_toolkit,
    )
