"""The view models the templates render: every value pre-sorted and pre-quoted here, in Python.

Templates receive only these frozen dataclasses and strings that are already safe for the place
they land (shell word, Dockerfile string, Markdown); they hold loops and conditions only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from envbuild import __version__
from envbuild.catalog.order import durations, order_lines, price_sources
from envbuild.errors import BundleError
from envbuild.imageref import image_problem
from envbuild.models import (
    IMAGE_USER,
    LOCK_FORMAT,
    LOCK_PATH_IN_IMAGE,
    TOOL_VENV_IN_IMAGE,
    VENV_PATH_IN_IMAGE,
    WORKDIR_IN_IMAGE,
    Plan,
)
from envbuild.plan.environment import nvidia_env
from envbuild.render.apt import apt_packages, runtime_packages
from envbuild.render.constraints import constraint_value
from envbuild.render.lockfile import checked_env
from envbuild.render.quote import check_plain, docker_str, md, sh
from envbuild.render.source_build import (
    ProbeOpsView,
    SourceBuildView,
    ToolkitView,
    builder_packages,
    probe_ops_view,
    source_build_view,
    toolkit_view,
)

_PYTHON_VERSION = re.compile(r"^3\.\d{1,2}$")
_FILENAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PROVISIONS = frozenset({"system", "deadsnakes", "base-image"})


@dataclass(frozen=True)
class EnvVar:
    key: str  # validated identifier
    value: str  # Dockerfile-quoted


SOURCE_DATE_EPOCH = 315532800


@dataclass(frozen=True)
class Blender:
    version: str
    url: str  # shell-quoted
    sha256_url: str  # shell-quoted
    tarball: str  # plain file name, validated
    checksums: str  # plain file name, validated
    pattern: str  # grep -E pattern matching the tarball's line in the checksum file


@dataclass(frozen=True)
class DockerfileView:
    envbuild_version: str
    command: str  # for a comment line
    profile_name: str
    profile_sha256: str
    base_image: str  # Dockerfile-quoted default of ARG BASE_IMAGE
    base_flavor: str
    backend: str
    python: str  # "python3.11", validated
    deadsnakes: bool
    apt: tuple[str, ...]  # shell-quoted, sorted, deduplicated by package name
    runtime_apt: tuple[str, ...]  # the same without the packages that only ship wheels (final stage)
    apt_pinned: bool  # every apt package carries =version (then DL3008 needs no ignore)
    # [system] snapshot: the instant, the service's URL (APT_SNAPSHOT_MIRROR's default) and the sources
    # lines, each double-quoted for the shell so ${APT_SNAPSHOT_MIRROR} expands; () without one.
    apt_snapshot: str | None
    apt_snapshot_url: str | None
    apt_sources: tuple[str, ...]
    env: tuple[EnvVar, ...]
    labels: tuple[EnvVar, ...]
    blender: Blender | None  # the official tarball's stage (blender.source = "official")
    # NVIDIA container toolkit variables (CUDA only): devices, capabilities (graphics for Blender's OptiX),
    # and NVIDIA_REQUIRE_CUDA on a plain OS base, where no NVIDIA image sets it
    nvidia_env: tuple[EnvVar, ...]
    extra_groups: str  # "video" for ROCm (device access), "" otherwise
    constraints: bool  # the bundle carries constraints/ (copied into the builder stage)
    # [python] build_from_source: the builder stage builds these sdists (None: nothing is built)
    source_build: SourceBuildView | None = None
    builder_apt: tuple[str, ...] = ()  # the builder stage's apt list: apt plus a compiler for a source build
    # Dockerfile-quoted default of ARG BUILDER_IMAGE: a source build's devel image on CUDA/ROCm (nvcc,
    # hipcc); None: the builder stage is on BASE_IMAGE
    builder_image: str | None = None
    probe_ops: ProbeOpsView | None = None  # the validator's ops, compiled in the builder stage
    # CUDA 13: CUDA's compiler wheels, installed into the builder stage's own prefix (None: not used)
    toolkit: ToolkitView | None = None
    venv: str = VENV_PATH_IN_IMAGE
    tool_venv: str = TOOL_VENV_IN_IMAGE
    lock_path: str = LOCK_PATH_IN_IMAGE
    workdir: str = WORKDIR_IN_IMAGE
    user: str = IMAGE_USER
    # Fixed for every bundle: pip's byte-compilation (py_compile) then writes hash-based .pyc files
    # instead of ones stamped with the install time, so two builds give the same bytes.  The value is
    # 1980-01-01T00:00:00Z, the earliest time a zip (a wheel) can carry; `--build-arg` overrides it.
    source_date_epoch: int = SOURCE_DATE_EPOCH


def _blender(plan: Plan) -> Blender | None:
    if not plan.blender_version or not plan.blender_url or not plan.blender_sha256_url:
        return None
    where = f"{plan.profile.path}: blender"
    tarball = urlsplit(check_plain(plan.blender_url, where)).path.rsplit("/", 1)[-1]
    checksums = urlsplit(check_plain(plan.blender_sha256_url, where)).path.rsplit("/", 1)[-1]
    for name in (tarball, checksums):
        if not _FILENAME.match(name):
            raise BundleError(f"{where}: unexpected download file name {name!r}")
    for url in (plan.blender_url, plan.blender_sha256_url):
        if urlsplit(url).scheme != "https":
            raise BundleError(f"{where}: download URL must be https: {url!r}")
    return Blender(
        version=check_plain(plan.blender_version, where),
        url=sh(plan.blender_url, where),
        sha256_url=sh(plan.blender_sha256_url, where),
        tarball=tarball,
        checksums=checksums,
        pattern=sh("[ *]" + tarball.replace(".", "\\.").replace("+", "\\+") + "$", where),
    )


def dockerfile_view(plan: Plan, command: str) -> DockerfileView:
    profile = plan.profile
    if not _PYTHON_VERSION.match(plan.python_version):
        raise BundleError(f"{profile.path}: python.version: expected 3.N, got {plan.python_version!r}")
    if plan.python_provision not in PROVISIONS:
        raise BundleError(
            f"{profile.path}: python.version: cannot provision Python {plan.python_version} on {plan.os} "
            f"(provisioning {plan.python_provision!r}; envbuild knows {', '.join(sorted(PROVISIONS))})"
        )
    problem = image_problem(plan.base_image)
    if problem is not None:
        raise BundleError(
            f"{profile.path}: base.image: {plan.base_image!r} is not an image reference ({problem})"
        )
    env: list[EnvVar] = []
    for key, value in checked_env(plan).items():
        if not _ENV_KEY.match(key):
            raise BundleError(f"{profile.path}: env.{key}: not a valid variable name")
        env.append(EnvVar(key, docker_str(value, f"{profile.path}: env.{key}")))
    label_values = {
        "org.envbuild.lock-format": LOCK_FORMAT,
        "org.envbuild.profile": profile.name,
        "org.envbuild.profile-sha256": profile.sha256,
        "org.envbuild.version": __version__,
        "org.opencontainers.image.base.name": plan.base_image,
        "org.opencontainers.image.description": profile.description or f"envbuild profile {profile.name}",
        "org.opencontainers.image.title": profile.name,
    }
    labels = tuple(
        EnvVar(key, docker_str(value, f"{profile.path}: label {key}"))
        for key, value in sorted(label_values.items())
    )
    apt = apt_packages(plan)
    return DockerfileView(
        envbuild_version=__version__,
        command=check_plain(command, "command"),
        profile_name=check_plain(profile.name, "name"),
        profile_sha256=profile.sha256,
        base_image=docker_str(plan.base_image, "base image"),
        base_flavor=plan.base_flavor,
        backend=plan.backend,
        python=f"python{plan.python_version}" if plan.python_provision != "base-image" else "python3",
        deadsnakes=plan.python_provision == "deadsnakes",
        apt=tuple(sh(p, "system.apt") for p in apt),
        runtime_apt=tuple(sh(p, "system.apt") for p in runtime_packages(apt)),
        apt_pinned=all("=" in p for p in apt),
        apt_snapshot=plan.apt_snapshot,
        apt_snapshot_url=docker_str(plan.apt_snapshot_url, "system.snapshot")
        if plan.apt_snapshot_url
        else None,
        apt_sources=tuple(_sources_line(line) for line in plan.apt_sources),
        env=tuple(env),
        labels=labels,
        blender=_blender(plan),
        nvidia_env=tuple(EnvVar(k, docker_str(v, k)) for k, v in nvidia_env(plan)),
        extra_groups="video" if plan.backend == "rocm" else "",
        constraints=any(constraint_value(line) is not None for line in plan.requirements),
        source_build=source_build_view(plan),
        builder_apt=tuple(sh(p, "system.apt") for p in builder_packages(plan, apt)),
        builder_image=docker_str(plan.builder_image, "builder image") if plan.builder_image else None,
        probe_ops=probe_ops_view(plan),
        toolkit=toolkit_view(plan),
    )


_SOURCES_LINE = re.compile(
    r"deb \[check-valid-until=no\] \$\{APT_SNAPSHOT_MIRROR\}/[a-z-]+/[0-9TZ]+ [a-z -]+"
)


def _sources_line(line: str) -> str:
    """A snapshot sources line double-quoted for the shell (only ``${APT_SNAPSHOT_MIRROR}`` expands):
    the line is the catalog's, checked here again against its one expected form."""
    if not _SOURCES_LINE.fullmatch(line):
        raise BundleError(f"system.snapshot: unexpected apt sources line {line!r}")
    return f'"{line}"'


# --------------------------------------------------------------------------------------------------
# README
# --------------------------------------------------------------------------------------------------

PREPARATION = {"ubuntu": "Ubuntu", "pytorch": "PyTorch", "blender": "Blender", "custom": "Custom image"}


@dataclass(frozen=True)
class OrderRow:
    card: str
    vendor: str
    arch: str
    cards_per_lot: int
    devices_per_card: int
    memory_per_device: str
    memory_per_lot: str
    lots: int
    cards: int
    devices: int
    memory_total: str
    prices: tuple[str, ...]  # per duration shown: "2 x 110.00 USD = 220.00 USD" or "no price known"
    across: str  # more than one lot: "the 2 lots are 2 separate machines; ... not NVLink", else ""


def _gib(value: float) -> str:
    return f"{value:g} GiB"


def order_rows(plan: Plan) -> tuple[OrderRow, ...]:
    """One row per GPU target: lots, cards, devices, memory and the USD total per duration shown."""
    return tuple(
        OrderRow(
            card=line.card.name,
            vendor=line.card.vendor,
            arch=line.card.arch or "-",
            cards_per_lot=line.card.cards_per_lot,
            devices_per_card=line.card.devices_per_card,
            memory_per_device=_gib(line.card.memory_per_device),
            memory_per_lot=_gib(line.card.memory_gib * line.card.cards_per_lot),
            lots=line.lots,
            cards=line.cards,
            devices=line.devices,
            memory_total=_gib(line.card.memory_gib * line.cards),
            prices=tuple(t.text for t in line.totals),
            across=md(line.across() or "", "order"),
        )
        for line in order_lines(plan)
    )


def order_host(plan: Plan) -> str:
    """Markdown ``64 GiB host memory, 8 CPUs`` when the profile declares either, else ``""``."""
    host = next((h for line in order_lines(plan) if (h := line.host())), None)
    return md(host, "order") if host else ""


def order_days(plan: Plan) -> tuple[int, ...]:
    """The durations the README's price columns show: the chosen one, or every one the provider rents."""
    return durations(plan)


def order_price_sources(plan: Plan) -> tuple[str, ...]:
    """Markdown-safe ``source (date)`` of every price the order table uses."""
    return tuple(md(s, "price source") for s in price_sources(plan))
