"""The planner: resolve a profile + target cards into a :class:`Plan` and check it.

``check(profile, targets=None, driver=None)`` never touches the network, torch or docker; it reads
the sourced catalog (``envbuild.catalog``) and returns every finding at once.  Unknown ``--target`` ids
and malformed ``--driver`` values are usage errors (:class:`envbuild.errors.UsageError`); the
profile's unknown targets and unknown ``torch.version`` are one :class:`envbuild.errors.ProfileError`
naming each file and key (:mod:`envbuild.profile.places`).

Decisions (documented here, tested in tests/test_plan_*.py and tests/test_compat_review.py):

* ``targets`` (from the CLI) replace ``profile.accelerator.targets``; a cpu profile without targets
  plans for the ``cpu`` pseudo-card.  ``--target H100`` means ``h100`` (card ids are lowercase).
* backend cuda/rocm on a card of the other vendor, or on ``cpu``, is an error; backend ``cpu`` on a
  GPU card is a warning (the card would sit idle, nothing breaks).
* without ``accelerator.version`` the CUDA variant is the PyPI default of the release, unless that
  build lacks cubins for a target or has no nvidia/cuda image for ``base.os`` and another published
  variant has both (an info says so); ROCm takes the newest published variant that carries the
  targets' gfx and has a ROCm image for the OS.
* ``kind = "pytorch"`` without ``torch.version`` (and no requirement line naming torch, which keeps
  W-TORCH-UNDECLARED) installs the newest release the catalog has confirmed (a ``ga`` release, its
  patch row not ``unconfirmed``); with ``accelerator.version`` set, the newest confirmed release that
  publishes that variant.  I-TORCH-DEFAULT says which and why.
* ``base.os`` absent (``Profile.sources["base.os"] == "default"``, no ``base.image``): when the
  default OS has no nvidia/cuda or rocm/dev image for the resolved toolkit, an OS that has one is used
  (one that provisions ``python.version`` first), with I-OS-DERIVED.  An explicit ``base.os`` is kept
  and refused with E-BASE-UNAVAILABLE as before.
* versions compare as PEP 440 versions: ``2.7.1.0`` / ``v2.7.1`` are 2.7.1, ``2.7`` is the newest 2.7
  patch; pre-releases, dev and post releases are refused (they live on /whl/test or /whl/nightly).
  ``accelerator.version`` ``12.8.x`` keeps the cu128 wheels and the catalog's 12.8.1 image; ROCm
  ``6.3.x`` selects rocm6.3 and ``6.2`` selects rocm6.2.4 (an info names what was used).
* requirement lines whose PEP 508 marker is false on the image (CPython X.Y, Linux x86_64) are
  skipped by the wheel-tag, torch-family and hash checks, as pip skips them.
* ``compiles`` (a toolchain in the final image) is true when torch is in the plan and
  ``validate.compile_extensions`` asks to compile the validator's probe ops on arrival, or when a
  requirement must be built (VCS URL, sdist URL, ``--no-binary``); it selects the devel/complete base.
  The probe ops themselves are compiled in the builder stage (:mod:`envbuild.plan.builder_image`).
  ``validate.torch_compile`` keeps a C compiler (g++, Python's headers) in the final image only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from envbuild.catalog import Catalog, load_catalog
from envbuild.errors import CatalogError, ProfileError, UsageError
from envbuild.findings import Findings
from envbuild.models import CheckResult, Plan, Profile
from envbuild.plan import (
    abi,
    environment,
    hardware,
    host_driver,
    memory_lots,
    packages,
    pins,
    resolve,
    toolkit,
)
from envbuild.plan.after_resolution import is_version
from envbuild.plan.blender import check_blender
from envbuild.plan.builder_image import builder_stage, torch_planned
from envbuild.plan.context import Context, setting
from envbuild.plan.resolved import ResolvedTorch, ServedTorch
from envbuild.plan.runtime_pins import check_nvidia_pins
from envbuild.profile.places import REFRESH_HINT, catalog_issues, pending_of, unknown_target
from envbuild.versions import validate_driver

__all__ = ["check"]


def _targets(profile: Profile, targets: Sequence[str] | None) -> list[str]:
    """Card ids, de-duplicated in order; ``--target`` values are matched case-insensitively."""
    ids = [t.strip().lower() for t in targets] if targets else list(profile.accelerator.targets)
    return list(dict.fromkeys(ids))


def _without_foreign_version(profile: Profile, catalog: Catalog, out: Findings) -> Profile:
    """An ``accelerator.version`` inherited through ``extends`` that names no version of this profile's
    backend (a parent's CUDA 13.0 under ``backend = "rocm"``) is dropped, saying where it came from, and
    the version is derived from the torch release as if it were unset."""
    acc = profile.accelerator
    source = profile.sources.get("accelerator.version", "")
    if acc.version is None or acc.backend == "cpu" or not source.startswith("extends:"):
        return profile
    if acc.backend == "cuda":
        known = catalog.cuda_toolkit("cu" + acc.version.replace(".", "")) is not None
    else:
        known = catalog.rocm_version("rocm" + acc.version) is not None
    if known:
        return profile
    kind = "CUDA" if acc.backend == "cuda" else "ROCm"
    out.info(
        "I-VERSION-INHERITED",
        f"{setting(profile, 'accelerator.version')} is not a {kind} version, so it is ignored for "
        f'accelerator.backend = "{acc.backend}" and the {kind} version is derived from the torch release; '
        "set accelerator.version in this profile to choose one",
    )
    return replace(profile, accelerator=replace(acc, version=None))


def _raise_profile_issues(
    profile: Profile,
    catalog: Catalog,
    cli_targets: bool,
    strict_torch: bool,
    served: ServedTorch | None,
    resolved: ResolvedTorch | None,
) -> None:
    """The profile's unknown targets and unknown ``torch.version``, with their file and key, as one
    :class:`ProfileError` (:mod:`envbuild.profile.places`).  A ``torch.version`` is unknown here only
    where :func:`envbuild.plan.resolve.resolve_torch` would refuse it (``strict_torch``, before an index
    is asked and before resolution)."""
    torch = profile.torch.version if strict_torch and resolved is None else None
    version = (torch or "").partition("+")[0]
    if torch is not None and served is not None and is_version(version) and served.serves(version):
        torch = None  # the index serves it: planned from the index (after_resolution.uncataloged)
    hint = f"no index asked serves it either ({served.describe()})" if served is not None else REFRESH_HINT
    values = pending_of(profile, targets=not cli_targets, torch=torch is not None)
    found = catalog_issues(catalog, values, hint=hint)
    if found:
        raise ProfileError(found)


def check(
    profile: Profile,
    targets: Sequence[str] | None = None,
    driver: str | None = None,
    *,
    served: ServedTorch | None = None,
    resolved: ResolvedTorch | None = None,
    strict_torch: bool = True,
) -> CheckResult:
    """Resolve and check ``profile`` for ``targets`` (card ids) and an optional NVIDIA ``driver``.

    After resolution (``envbuild check --resolve``, ``envbuild lock``; :mod:`envbuild.lock.replan`),
    ``served`` says which torch builds the indexes serve (pins follow it: a local tag or the default
    build) and ``resolved`` is the torch the resolved set installs, which then decides the torch
    version, its CUDA/ROCm build, the base image and the driver floor.  ``strict_torch=False`` turns an
    unknown ``torch.version`` into E-TORCH-UNKNOWN instead of a usage error (before the index is asked).
    """
    catalog = load_catalog()
    if driver is not None:
        validate_driver(driver)
    ids = _targets(profile, targets)
    unknown = [i for i in ids if catalog.card(i) is None]
    if unknown and targets:
        raise UsageError(f"--target: {unknown_target(catalog, unknown[0])}")
    _raise_profile_issues(profile, catalog, bool(targets), strict_torch, served, resolved)
    cards = [c for i in ids if (c := catalog.card(i)) is not None]
    if not cards and profile.accelerator.backend == "cpu":
        cpu = catalog.card("cpu")
        cards = [cpu] if cpu else []
    os_entry = catalog.os(profile.base.os)
    if os_entry is None:
        raise CatalogError(f"platform.toml: no row for OS {profile.base.os!r}")

    out = Findings()
    profile = _without_foreign_version(profile, catalog, out)
    ctx = Context(catalog=catalog, profile=profile, cards=cards, os=os_entry, driver=driver)
    ctx.cli_targets = bool(targets)
    ctx.served, ctx.resolved, ctx.strict_torch = served, resolved, strict_torch
    resolve.resolve_torch(ctx, out)
    if ctx.patch is None and ctx.toolkit is None and ctx.rocm is None:  # no torch, or one the catalog lacks
        toolkit.resolve_toolkit_without_torch(ctx, out)
    builds, vcs = packages.check_requirement_urls(ctx, out)
    ctx.compiles = builds or (torch_planned(ctx) and profile.validate_.compile_extensions)
    pins.resolve_pins(ctx, out)
    check_nvidia_pins(ctx, out)
    packages.check_hash_mode(ctx, out)
    packages.check_declared_pins(ctx, out)
    abi.check_abi(ctx, out)
    hardware.check_vendor(ctx, out)
    hardware.check_arch(ctx, out)
    hardware.check_toolkit_minimums(ctx, out)
    host_driver.check_driver(ctx, out)
    memory_lots.check_memory_and_lots(ctx, out)
    provision = environment.python_provision(ctx, out)
    image, flavor = environment.base_image(ctx, out)
    builder = builder_stage(ctx, flavor, out)
    environment.check_glibc(ctx, out)
    apt_sources, apt_snapshot_url = environment.apt_snapshot(ctx, out, flavor, provision)
    blender_version, blender_url, blender_sha = check_blender(ctx, out)
    packages.note_unresolved(ctx, out)
    host_driver.note_provisional_driver(ctx, out)
    if catalog.overlay is not None:  # the user's overlay (envbuild catalog refresh): its age, its rows
        from envbuild.catalog.overlay import findings as overlay_findings

        patch = ctx.patch.version if ctx.patch is not None else None
        archs = tuple(c.arch for c in cards)
        for severity, code, message, source in overlay_findings(catalog.overlay, patch, ctx.variant, archs):
            out.add(severity, code, message, source=source)

    if ctx.cuda_wheel is not None:
        arch_list = ctx.cuda_wheel.archs
    elif ctx.rocm_wheel is not None:
        arch_list = ctx.rocm_wheel.targets
    else:
        arch_list = ()
    if ctx.toolkit is not None and ctx.backend == "cuda":
        acc_version: str | None = ctx.toolkit.version
    elif ctx.rocm is not None and ctx.backend == "rocm":
        acc_version = ctx.rocm.version
    else:
        acc_version = profile.accelerator.version if ctx.backend != "cpu" else None
    plan = Plan(
        profile=profile,
        targets=tuple(c.card for c in cards),
        os=ctx.os.id,  # base.os, or the OS chosen for its base image when base.os is absent
        os_name=ctx.os.name,
        base_image=image,
        base_flavor=flavor,
        builder_image=builder.image,
        builder_toolkit=builder.toolkit,
        probe_ops=builder.probe_ops,
        python_version=profile.python.version,
        python_provision=provision,
        backend=profile.accelerator.backend,
        accelerator_version=acc_version,
        torch_variant=ctx.variant if ctx.patch is not None or ctx.uncataloged else None,
        torch_version=ctx.patch.version if ctx.patch is not None else ctx.uncataloged,
        index_urls=packages.index_urls(ctx),
        pins=tuple(ctx.pins),
        requirements=tuple(ctx.requirements),
        apt=environment.apt_packages(ctx, provision, vcs=vcs),
        apt_snapshot=profile.system.snapshot if apt_sources else None,
        apt_sources=apt_sources,
        apt_snapshot_url=apt_snapshot_url,
        torch_arch_list=arch_list,
        required_archs=tuple(sorted({c.arch for c in cards if c.arch})),
        min_driver=host_driver.min_driver(ctx),
        compiles=ctx.compiles,
        blender_version=blender_version,
        blender_url=blender_url,
        blender_sha256_url=blender_sha,
        blender_source=profile.blender.source if blender_version else None,
    )
    return CheckResult(plan=plan, findings=out.result())
