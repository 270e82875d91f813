"""The lock: the declared environment, as ``validate`` will compare it with the machine received."""

from __future__ import annotations

from urllib.parse import urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from envbuild import __version__
from envbuild.errors import BundleError
from envbuild.models import (
    PYTHON_IN_IMAGE,
    WORKDIR_IN_IMAGE,
    Lock,
    LockPackage,
    LockTarget,
    Plan,
    Profile,
    RequirementLine,
)
from envbuild.profile.fields import secret_value_reason
from envbuild.render.apt import apt_packages, runtime_packages
from envbuild.render.constraints import collect_constraints
from envbuild.secrets import env_name_reason

_OS_RELEASE = {
    "ubuntu22.04": ("ubuntu", "22.04"),
    "ubuntu24.04": ("ubuntu", "24.04"),
    "debian12": ("debian", "12"),
}


def os_release(os_id: str) -> tuple[str, str]:
    """``("ubuntu", "24.04")`` for ``ubuntu24.04``: the ``ID`` and ``VERSION_ID`` of /etc/os-release."""
    return _OS_RELEASE[os_id]


def checked_env(plan: Plan) -> dict[str, str]:
    """The profile's ``[env]``, refusing secret-looking keys or values (the loader rejects them already;
    this is the second line of defence, with the loader's own rules)."""
    allowed = plan.profile.env_allow_names
    for key, value in plan.profile.env.items():
        reason = env_name_reason(key, value, allowed) or secret_value_reason(value)
        if reason:
            raise BundleError(
                f"{plan.profile.path}: env.{key}: looks like a secret ({reason}); provide secrets at run "
                "time, never in the profile"
            )
    return dict(sorted(plan.profile.env.items()))


def exact_version(line: RequirementLine) -> tuple[str | None, str | None]:
    """``(version, local)`` when ``line`` pins one exact version (``==``/``===`` or a wheel URL)."""
    try:
        req = Requirement(line.text)
    except InvalidRequirement:
        return None, None
    text: str | None = None
    if req.url:
        filename = urlsplit(req.url).path.rsplit("/", 1)[-1]
        if filename.endswith(".whl"):
            try:
                text = str(parse_wheel_filename(filename)[1])
            except InvalidWheelFilename:
                return None, None
    else:
        specs = list(req.specifier)
        if len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version:
            text = specs[0].version
    if text is None:
        return None, None
    try:
        version = Version(text)
    except InvalidVersion:
        return text, None
    return version.public, version.local


def lock_packages(plan: Plan, torch_origin: str | None = None) -> tuple[LockPackage, ...]:
    """Torch-family pins first, then the user's requirements in declared order, one per project."""
    packages: dict[str, LockPackage] = {}
    for pin in plan.pins:
        name = canonicalize_name(pin.name)
        reason = pin.reason
        if name == "torch" and plan.profile.torch.version is None:  # the pin's own text says torch.version
            reason = reason.replace(" (torch.version)", f" ({torch_origin or torch_pin_origin(plan)})")
        packages[name] = LockPackage(
            name=name, version=pin.version, local=pin.local, requirement=pin.spec, origin=reason
        )
    for line in plan.requirements:
        if line.kind != "requirement" or not line.name:
            continue
        name = canonicalize_name(line.name)
        version, local = exact_version(line)
        entry = LockPackage(
            name=name, version=version, local=local, requirement=line.text, origin=line.origin
        )
        previous = packages.get(name)
        if previous is None or (previous.version is None and version is not None):
            packages[name] = entry
    return tuple(packages.values())


PIN_ORIGIN = "torch.version (torch-family pin)"
# Every other pin's origin starts with PIN_FAMILY (is_pin_origin)
PIN_FAMILY = "torch-family pin"
DEFAULT_TORCH_ORIGIN = (
    f"{PIN_FAMILY}: default torch (the catalog's newest confirmed release; the profile declares no "
    "torch.version)"
)
COMPANION_ORIGIN = f"{PIN_FAMILY}: paired with the planned torch"
RESOLVED_TORCH_ORIGIN = (
    f"{PIN_FAMILY}: the torch the resolved set installs (a dependency requires it; the profile declares no "
    "torch.version)"
)


def torch_pin_origin(plan: Plan) -> str:
    """Where the plan's torch pin comes from: the profile's torch.version, an exact ``torch==X`` line,
    the torch a bare line or a dependency brought in (after resolution), or the pytorch kind's default."""
    if plan.profile.torch.version is not None:
        return PIN_ORIGIN
    lines = [  # as declared: the plan's requirements no longer hold a torch line that a pin superseded
        line
        for line in plan.profile.python.lines
        if line.kind == "requirement" and line.name and canonicalize_name(line.name) == "torch"
    ]
    exact = next((line for line in lines if exact_version(line)[0] is not None), None)
    if exact is not None:
        return f"{PIN_FAMILY}: {exact.text} in {exact.origin}"
    if lines:
        first = lines[0]
        return f"{PIN_FAMILY}: the torch the resolved set installs ({first.origin}: {first.text} allows it)"
    return DEFAULT_TORCH_ORIGIN if plan.profile.kind == "pytorch" else RESOLVED_TORCH_ORIGIN


def pin_origins(plan: Plan, torch_origin: str | None = None) -> dict[str, str]:
    """Each torch-family pin's origin (``torch_origin``: what ``envbuild lock`` knows of the torch pin)."""
    declared = plan.profile.torch.version is not None
    return {
        str(canonicalize_name(pin.name)): (
            torch_origin or torch_pin_origin(plan)
            if pin.name == "torch"
            else (PIN_ORIGIN if declared else COMPANION_ORIGIN)
        )
        for pin in plan.pins
    }


def declared_lines(plan: Plan, torch_origin: str | None = None) -> tuple[RequirementLine, ...]:
    """The resolver's input: the torch-family pins, then every requirement and option line as declared."""
    origins = pin_origins(plan, torch_origin)
    pins = tuple(
        RequirementLine(
            kind="requirement",
            text=pin.spec,
            name=canonicalize_name(pin.name),
            origin=origins[str(canonicalize_name(pin.name))],
        )
        for pin in plan.pins
    )
    return pins + tuple(line for line in plan.requirements if line.kind != "include")


def is_pin_origin(origin: str) -> bool:
    """A declared line's origin is a torch-family pin's (not one of the profile's own lines)."""
    return origin == PIN_ORIGIN or origin.startswith(PIN_FAMILY)


def source_names(profile: Profile) -> tuple[str, ...]:
    """``[python] build_from_source`` as PEP 503 names, sorted, each once."""
    from packaging.utils import canonicalize_name

    return tuple(sorted({str(canonicalize_name(n)) for n in profile.python.build_from_source}))


def make_lock(
    plan: Plan, *, constraint_files: tuple[str, ...] | None = None, torch_origin: str | None = None
) -> Lock:
    """The lock of ``plan``; ``constraint_files`` (the bundle paths of the ``-c`` copies) are collected
    from the profile's folder unless given (``envbuild lock`` gives the bundle's own); ``torch_origin``:
    where ``envbuild lock`` found the torch pin came from (the plan alone cannot tell)."""
    profile = plan.profile
    if constraint_files is None:
        constraint_files = tuple(c.bundle_path for c in collect_constraints(plan))
    release_id, release_version = os_release(plan.os)
    return Lock(
        envbuild_version=__version__,
        profile_name=profile.name,
        profile_kind=profile.kind,
        profile_sha256=profile.sha256,
        sources=dict(sorted(profile.sources.items())),
        os=plan.os,
        os_release_id=release_id,
        os_release_version=release_version,
        base_image=plan.base_image,
        python_version=plan.python_version,
        python_executable=PYTHON_IN_IMAGE,
        backend=plan.backend,
        accelerator_version=plan.accelerator_version,
        torch_version=plan.torch_version,
        torch_variant=plan.torch_variant,
        torch_arch_list=plan.torch_arch_list,
        required_archs=plan.required_archs,
        min_driver=plan.min_driver,
        targets=tuple(
            LockTarget(
                id=card.id,
                name=card.name,
                vendor=card.vendor,
                arch=card.arch,
                memory_gib=card.memory_gib,
                cards_per_lot=card.cards_per_lot,
                devices_per_card=card.devices_per_card,
                device_memory_gib=card.device_memory_gib,
            )
            for card in plan.targets
        ),
        gpus=profile.resources.gpus,
        gpu_memory_gib=profile.resources.gpu_memory_gib,
        memory_gib=profile.resources.memory_gib,
        cpus=profile.resources.cpus,
        network_gbps=profile.resources.network_gbps,
        packages=lock_packages(plan, torch_origin),
        apt=tuple(runtime_packages(apt_packages(plan))),
        apt_snapshot=plan.apt_snapshot,
        env=checked_env(plan),
        checks=profile.checks,
        extensions=profile.validate_.extensions,
        compile_extensions=profile.validate_.compile_extensions,
        probe_ops=plan.probe_ops,
        torch_compile=profile.validate_.torch_compile,
        checkpoint_dir=profile.validate_.checkpoint_dir,
        workdir=WORKDIR_IN_IMAGE,
        blender_version=plan.blender_version,
        blender_devices=profile.blender.devices,
        blender_source=plan.blender_source,
        index_urls=plan.index_urls,
        declared=declared_lines(plan, torch_origin),
        constraint_files=constraint_files,
        build_from_source=source_names(profile),
        allow_old=tuple(sorted({str(canonicalize_name(n)) for n in profile.python.allow_old})),
    )
