"""The lock (written by render and ``envbuild lock``, read by validate), the bundle's recorded inputs,
and where envbuild puts things in the image.  The lock file's text is written by :func:`lock_json` and
read back by :func:`read_lock`; :func:`check_bundle` reads a bundle's lock, refusing an incomplete bundle.

The lock's JSON schema is the contract between the "before ordering" and "on arrival" halves; bump
:data:`LOCK_FORMAT` when it changes incompatibly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from envbuild.boundary import INPUT, InvalidData, parse_json, to_data
from envbuild.models.cards import Devices, LotPrice, Vendor
from envbuild.models.plan import IndexUrl
from envbuild.models.profile import (
    Backend,
    BlenderDevice,
    BlenderSource,
    CheckSpec,
    Kind,
    OsId,
    Profile,
    RequirementLine,
)

LOCK_FORMAT: Final = "envbuild.lock/1"
LOCK_PATH_IN_IMAGE = "/etc/envbuild/envbuild.lock.json"
# LockedDistribution.index of a distribution taken from a local --find-links folder: the lock records
# its files by name and sha256 only, never the folder's path (`envbuild fetch --find-links DIR`).
LOCAL_FOLDER: Final = "a local --find-links folder"
VENV_PATH_IN_IMAGE = "/opt/venv"
PYTHON_IN_IMAGE = "/opt/venv/bin/python"
TOOL_VENV_IN_IMAGE = "/opt/envbuild"  # envbuild itself, isolated from the user's venv
WORKDIR_IN_IMAGE = "/workspace"
PROBE_OPS_IN_IMAGE = "/opt/envbuild-probe-ops"  # the validator's ops, compiled in the builder stage
# CUDA 13: the builder stage's own prefix for CUDA's compiler wheels (pip install --target); the final
# stage never copies it
TOOLKIT_IN_BUILDER = "/opt/envbuild-cuda"
IMAGE_USER = "envbuild"


# --------------------------------------------------------------------------------------------------
# Lock (written by render, read by validate)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class LockTarget(Devices):
    id: str
    name: str
    vendor: Vendor
    arch: str
    memory_gib: float
    cards_per_lot: int
    devices_per_card: int = 1  # what torch sees per card (MI250X: 2 GCDs)
    device_memory_gib: float | None = None  # per device when a card is several


@dataclass(frozen=True, kw_only=True)
class LockPackage:
    name: str
    version: str | None  # None when the requirement is not an exact pin
    local: str | None = None
    requirement: str  # the requirement text as declared
    origin: str


@dataclass(frozen=True, kw_only=True)
class LockedFile:
    """One file of a locked distribution that installs on the lock's target (a wheel, normally)."""

    filename: str  # "numpy-2.2.6-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
    # where the resolver found it (https://..., no credentials); "" for a file of a local --find-links
    # folder, recorded by name and sha256 only (fetch finds it in the wheelhouse or a --find-links DIR)
    url: str
    sha256: str  # hex digest
    size: int | None = None


@dataclass(frozen=True, kw_only=True)
class LockedDistribution:
    """One distribution of the fully resolved environment (written by ``envbuild lock``)."""

    name: str  # canonical project name
    version: str  # public version ("2.13.0")
    local: str | None = None  # "cpu", "cu128" (the torch family's variant tag)
    files: tuple[LockedFile, ...]  # the target platform's file(s); their sha256 are the allowed hashes
    declared_by: tuple[str, ...] = ()  # the profile's own lines: "requirements.txt:3", "torch pin"
    required_by: tuple[str, ...] = ()  # parent distributions (canonical names)
    index: str | None = None  # the index or --find-links URL it came from, or LOCAL_FOLDER
    # "install": its wheel installs as locked; "source": its locked file is the sdist, built into a wheel
    # in the builder stage ([python] build_from_source); "build": a build dependency of a "source"
    # distribution, used in the builder stage only, never installed in the image; "toolkit": a wheel of
    # CUDA's compiler (cuda-toolkit[nvcc,cccl], CUDA 13), installed into the builder stage's own prefix
    # (requirements-toolkit.txt), never in the image.  The toolkit's prefix must hold every wheel of it, so
    # a distribution the image installs too (nvidia-cuda-runtime) is listed once per role, same files.
    role: Literal["install", "source", "build", "toolkit"] = "install"

    @property
    def in_image(self) -> bool:
        """Installed in the image (as its wheel, or as the wheel built from its sdist): what validate
        compares with the machine.  Build dependencies and the toolkit are used in the builder stage only."""
        return self.role in ("install", "source")

    @property
    def spec(self) -> str:
        return f"{self.name}=={self.version}" + (f"+{self.local}" if self.local else "")

    @property
    def hashes(self) -> tuple[str, ...]:
        return tuple(sorted(f"sha256:{f.sha256}" for f in self.files))


@dataclass(frozen=True, kw_only=True)
class LockResolution:
    """How the lock was resolved: enough to redo it and to say what it assumed."""

    resolver: str  # "uv 0.13.9"
    envbuild_version: str
    python_version: str  # "3.11"
    implementation: str  # "cp"
    platform: str  # the resolver's platform ("x86_64-manylinux_2_36")
    wheel_tags: tuple[str, ...]  # platform tags accepted, newest first ("manylinux_2_36_x86_64", ...)
    # credentials as ${ENVBUILD_INDEX_N_USER}-style references (envbuild/lock/urls.py), never values
    index_urls: tuple[str, ...]  # first is the primary index
    find_links: tuple[str, ...] = ()  # --find-links URLs; a local folder is never recorded by its path
    find_links_folders: int = 0  # how many local --find-links folders the resolver was given
    indexes_from: Literal["bundle", "command line"] = "bundle"


@dataclass(frozen=True, kw_only=True)
class Lock:
    __pydantic_config__ = INPUT  # read from outside: see envbuild.boundary

    format: Literal["envbuild.lock/1"] = LOCK_FORMAT
    envbuild_version: str
    profile_name: str
    profile_kind: Kind
    profile_sha256: str
    sources: dict[str, str]
    os: OsId
    os_release_id: str  # "ubuntu" | "debian"
    os_release_version: str  # "24.04" | "12"
    base_image: str
    python_version: str
    python_executable: str  # PYTHON_IN_IMAGE
    backend: Backend
    accelerator_version: str | None
    torch_version: str | None
    torch_variant: str | None
    torch_arch_list: tuple[str, ...]
    required_archs: tuple[str, ...]
    min_driver: str | None
    targets: tuple[LockTarget, ...]
    gpus: int
    gpu_memory_gib: float | None
    memory_gib: float | None = None  # resources.memory_gib: host memory the container must allow
    cpus: float | None = None  # resources.cpus: CPU cores the container must allow
    network_gbps: float | None = None  # resources.network_gbps: the lots' network, Gbit/s (--fleet)
    packages: tuple[LockPackage, ...]  # exact pins first (torch family), then the user's
    apt: tuple[str, ...]
    apt_snapshot: str | None = None  # [system] snapshot: the archive instant apt read at build time
    env: dict[str, str]  # secret-looking values are never stored
    checks: tuple[CheckSpec, ...]
    extensions: tuple[str, ...]
    compile_extensions: bool  # also compile the probe ops on arrival (the image keeps a toolchain)
    # The validator's ops the builder stage compiles ("cpp", and "cuda"/"rocm"), and where the final image
    # holds them; () in a lock written before them (validate then compiles as compile_extensions says).
    probe_ops: tuple[str, ...] = ()
    probe_ops_dir: str = PROBE_OPS_IN_IMAGE
    torch_compile: bool = False  # validate.torch_compile: run a small torch.compile on arrival
    checkpoint_dir: str
    workdir: str = WORKDIR_IN_IMAGE
    blender_version: str | None = None
    blender_devices: tuple[BlenderDevice, ...] = ()
    blender_source: BlenderSource | None = None  # how Blender is installed (None: no Blender, or an old lock)
    # The sha256 of the official tarball (blender_source "official"), recorded by the bundle's first
    # `envbuild fetch`; every later fetch (and --blender-tarball) must bring the same bytes.  None: not
    # fetched yet, or a lock written before the field (it loads as before).
    blender_sha256: str | None = None
    # The resolver's input, as declared: index URLs, every requirement line (torch-family pins first,
    # then the profile's lines with their origins, duplicates kept) and the bundle's constraint copies.
    index_urls: tuple[IndexUrl, ...] = ()
    declared: tuple[RequirementLine, ...] = ()
    constraint_files: tuple[str, ...] = ()  # "constraints/01-constraints.txt", relative to the bundle
    build_from_source: tuple[str, ...] = ()  # [python] build_from_source, PEP 503 names, sorted
    # [python] allow_old, PEP 503 names, sorted: lock may pick them more than one series behind the newest
    # (written only when set, so a lock without it keeps its bytes)
    allow_old: tuple[str, ...] = ()
    # Written by `envbuild lock`: every distribution of the environment, pinned with its hashes.
    resolved: bool = False
    resolution: LockResolution | None = None
    distributions: tuple[LockedDistribution, ...] = ()


INPUTS_FORMAT: Final = "envbuild.inputs/1"
INPUTS_FILE = "envbuild.inputs.json"


@dataclass(frozen=True, kw_only=True)
class BundleInputs:
    """What a bundle was rendered from (``envbuild.inputs.json``), so that ``envbuild lock`` can derive
    the plan again from the resolved set, and a re-render can tell whether anything changed.

    No path of the rendering machine is stored: the profile's ``folder`` is dropped and its ``path`` is
    the one the regenerate command names; its app files and constraint copies are in the bundle."""

    __pydantic_config__ = INPUT  # read from outside: see envbuild.boundary

    format: Literal["envbuild.inputs/1"] = INPUTS_FORMAT
    profile: Profile  # the loaded profile (its requirement lines parsed, ``folder`` None)
    targets: tuple[str, ...] | None = None  # --target ids given to render (None: the profile's own)
    driver: str | None = None  # render --driver: the NVIDIA driver version the plan was checked against
    days: int | None = None
    prices: tuple[LotPrice, ...] = ()  # the lot prices in force for the targets (built-in, then --prices)
    apt_recorded: tuple[tuple[str, str], ...] = ()  # render --apt-from RECORD
    command: str  # the regenerate command recorded in the bundle
    bake: bool = False  # docker-bake.hcl written too


# What a bundle must hold for lock, fetch and build to take it (:func:`check_bundle`).
BUNDLE_REQUIRED = ("Dockerfile", "envbuild.lock.json", "requirements-rebuild.txt")


def read_lock(path: Path) -> Lock:
    """Read and validate a lock file; raise :class:`envbuild.errors.LockError` on any problem."""
    from envbuild.errors import LockError

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise LockError(f"{path}: cannot read lock file: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise LockError(f"{path}: not UTF-8 text (expected a JSON lock of format {LOCK_FORMAT})") from None
    try:
        return parse_json(Lock, text)
    except InvalidData as exc:
        raise LockError(f"{path}: {exc} (expected format {LOCK_FORMAT})") from None


def lock_json(lock: Lock) -> str:
    """The lock file text (what :func:`read_lock` reads): sorted keys, indent 2, LF, trailing newline.

    ``blender_sha256`` is written once a fetch recorded it: a lock without it keeps the bytes (and the
    readers) it had before the field."""
    unset = (("blender_sha256",) if lock.blender_sha256 is None else ()) + (
        () if lock.allow_old else ("allow_old",)
    )
    return json.dumps(to_data(lock, exclude=unset), sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def check_bundle(bundle: Path) -> Lock:
    """Refuse a missing or incomplete bundle, or one whose lock does not read; return the lock (for
    ``envbuild lock``, ``fetch`` and ``build``)."""
    from envbuild.errors import BundleError

    if not bundle.is_dir():
        raise BundleError(f"{bundle}: not a bundle directory (render one with `envbuild render`)")
    missing = [name for name in BUNDLE_REQUIRED if not (bundle / name).is_file()]
    if missing:
        raise BundleError(
            f"{bundle}: incomplete bundle, missing {', '.join(missing)} (re-run `envbuild render`)"
        )
    return read_lock(bundle / "envbuild.lock.json")  # the image must not carry a damaged lock
