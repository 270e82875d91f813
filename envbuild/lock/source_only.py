"""What to do about a distribution that has only a source distribution for the target
(``E-SOURCE-ONLY`` / ``E-SOURCE-NEEDS-TORCH``); :func:`envbuild.lock.resolve.conflict_findings` raises it
only where the release the resolution needs really has no wheel the target installs."""

from __future__ import annotations

from envbuild.lock.sources import source_build_facts
from envbuild.lock.target import Target
from envbuild.lock.uv import Sources
from envbuild.models import Finding, Lock, RequirementLine
from envbuild.plan.abi import flash_attn_for_lock


def describe_lines(lines: list[RequirementLine]) -> str:
    return "; ".join(f"{line.origin}: {line.text}" for line in lines)


def source_only_finding(
    name: str,
    declared: list[RequirementLine],
    target: Target,
    sources: Sources,
    lock: Lock | None = None,
) -> Finding:
    """What to do about a distribution that has only a source distribution for the target.

    ``lock`` gives the torch, variant and Python the image installs: for flash-attn, its GitHub release's
    wheel for them is named when the release builds one (abi.toml's rows)."""
    facts = source_build_facts(name, declared, sources)
    what = f"{name} {facts.version}" if facts.version else name
    where = describe_lines(declared) if declared else "a dependency of the profile's requirements"
    abi = f"cp{target.interpreter[0]}{target.interpreter[1]}"
    if facts.needs_torch:
        head = (
            f"{what} ({where}) is published only as a source distribution for {target.describe()}, and its "
            f"build imports torch ({facts.evidence}), so pip cannot build it in an isolated build "
            "environment."
        )
        build = (
            "build it in the image: add it to the profile's "
            f'`[python] build_from_source = ["{name}"]` (envbuild locks its sdist and build dependencies '
            "with their hashes and builds it in the builder stage after the locked torch, for the ordered "
            "cards' archs only)"
        )
        release = (
            flash_attn_for_lock(facts.version, lock.torch_version, lock.torch_variant, lock.python_version)
            if name == "flash-attn" and facts.version and lock is not None
            else None
        )
        if release is not None and release.url is not None:
            message = (
                f"{head} Either use the wheel its GitHub release builds for {release.plan}, as a direct "
                f"URL in place of the requirement (`{name} @ {release.url}`), or {build}"
            )
        elif release is not None:
            message = (
                f"{head} Either {build}, or pick a torch and Python its GitHub release builds wheels for: "
                f"it builds none for {release.plan} (it builds {release.builds})"
            )
        else:
            message = (
                f"{head} Either {build}, or use a prebuilt wheel for this torch/CUDA/Python triple as a "
                f"direct URL (`{name} @ https://.../<wheel built for the torch release, its variant and "
                f"{abi}>.whl`)"
            )
        source = release.source if release is not None else None
        return Finding(severity="error", code="E-SOURCE-NEEDS-TORCH", message=message, source=source)
    evidence = f" ({facts.evidence})" if facts.evidence else ""
    message = (
        f"{what} ({where}) has no wheel for {target.describe()}, only a source distribution{evidence}; the "
        "image installs wheels only (--only-binary :all:). Pin a release that publishes a wheel for this "
        "Python and platform, or give a wheel URL"
    )
    return Finding(severity="error", code="E-SOURCE-ONLY", message=message)


__all__ = ["describe_lines", "source_only_finding"]
