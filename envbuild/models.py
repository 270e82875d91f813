"""Typed, frozen models shared by the stages.

After loading there are no loose dicts: ``profile`` produces a :class:`Profile`, ``plan`` a
:class:`Plan` (plus :class:`Finding` s), ``render`` writes a :class:`Lock` that ``validate`` reads.
The lock's JSON schema is the contract between the "before ordering" and "on arrival" halves;
bump :data:`LOCK_FORMAT` when it changes incompatibly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from envbuild.boundary import INPUT, InvalidData, parse_json

Backend = Literal["cuda", "rocm", "cpu"]
Kind = Literal["ubuntu", "pytorch", "blender", "custom"]
OsId = Literal["ubuntu22.04", "ubuntu24.04", "debian12"]
Severity = Literal["error", "warning", "info"]
BlenderDevice = Literal["CPU", "CUDA", "OPTIX", "HIP", "ONEAPI"]
BlenderSource = Literal["official", "pypi"]  # the official Linux tarball, or the bpy module from the index
Vendor = Literal["nvidia", "amd", "cpu"]

LOCK_FORMAT: Final = "envbuild.lock/1"
LOCK_PATH_IN_IMAGE = "/etc/envbuild/envbuild.lock.json"
# LockedDistribution.index of a distribution taken from a local --find-links folder: the lock records
# its files by name and sha256 only, never the folder's path (`envbuild fetch --find-links DIR`).
LOCAL_FOLDER: Final = "a local --find-links folder"
VENV_PATH_IN_IMAGE = "/opt/venv"
PYTHON_IN_IMAGE = "/opt/venv/bin/python"
TOOL_VENV_IN_IMAGE = "/opt/envbuild"  # envbuild itself, isolated from the user's venv
WORKDIR_IN_IMAGE = "/workspace"
IMAGE_USER = "envbuild"


# --------------------------------------------------------------------------------------------------
# Profile (output of envbuild.profile)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class RequirementLine:
    """One logical line of a pip requirements file (continuations joined, comments stripped).

    ``kind`` is "requirement" (a PEP 508 string or a direct URL requirement ``name @ url``),
    "option" (``--extra-index-url``, ``--hash`` stays attached to its requirement in ``hashes``,
    ``-c``/``-e`` etc.), or "include" (``-r other.txt``, already expanded; kept for provenance).
    """

    kind: Literal["requirement", "option", "include"]
    text: str  # normalised text to write back out
    name: str | None = None  # canonical project name for requirements
    hashes: tuple[str, ...] = ()
    origin: str  # "requirements.txt:12" or "profile:python.packages[0]"


@dataclass(frozen=True, kw_only=True)
class BaseSpec:
    os: OsId = "ubuntu24.04"
    image: str | None = None  # explicit base image, overrides the derived one


@dataclass(frozen=True, kw_only=True)
class AcceleratorSpec:
    backend: Backend = "cpu"
    version: str | None = None  # "12.8", "6.3"; derived from the torch release when None
    targets: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class PythonSpec:
    version: str = "3.11"
    packages: tuple[str, ...] = ()
    requirements: tuple[str, ...] = ()  # paths relative to the profile's folder
    lines: tuple[RequirementLine, ...] = ()  # parsed from packages + requirements, in order


@dataclass(frozen=True, kw_only=True)
class TorchSpec:
    version: str | None = None
    packages: tuple[str, ...] = ()  # companions: torchvision, torchaudio, ... (bare names or pins)


@dataclass(frozen=True, kw_only=True)
class BlenderSpec:
    version: str | None = None
    devices: tuple[BlenderDevice, ...] = ()
    source: BlenderSource = "official"


@dataclass(frozen=True, kw_only=True)
class SystemSpec:
    apt: tuple[str, ...] = ()
    snapshot: str | None = None  # "YYYYMMDDTHHMMSSZ": apt reads the distribution's snapshot archive


@dataclass(frozen=True, kw_only=True)
class ResourcesSpec:
    gpu_memory_gib: float | None = None  # peak need per card
    gpus: int = 1  # cards the job uses at once
    memory_gib: float | None = None  # host memory the job needs inside its container
    cpus: float | None = None  # CPU cores the job needs inside its container


@dataclass(frozen=True, kw_only=True)
class CheckSpec:
    """A user's own pilot check, run by the validator's ``checks`` stage."""

    __pydantic_config__ = INPUT  # read from outside: see envbuild.boundary

    name: str
    run: tuple[str, ...]  # argv, never a shell string
    timeout_s: int = 600
    expect_exit: int = 0
    expect_files: tuple[str, ...] = ()  # must exist and be non-empty, relative to the workdir
    expect_json: dict[str, str | int | float | bool] = field(default_factory=dict)
    # "file.json:dotted.key" -> expected value


@dataclass(frozen=True, kw_only=True)
class ValidateSpec:
    """Options for the on-arrival validator, declared with the profile."""

    extensions: tuple[str, ...] = ()  # extension packages to import and smoke-test (flash_attn, ...)
    compile_extensions: bool = True  # compile+run a custom op; needs a toolchain in the image
    checkpoint_dir: str = "runs/envbuild-checkpoint"  # relative to the workdir


@dataclass(frozen=True, kw_only=True)
class AppSpec:
    source: str | None = None  # folder (relative to the profile) copied into the image last


@dataclass(frozen=True, kw_only=True)
class Origin:
    """The profile file that set a key (:attr:`Profile.origins`), for messages about inherited values."""

    profile: str  # that file's ``name`` ("pytorch"); its file when it sets no name
    file: str  # "builtin:pytorch", or the file relative to the root profile's folder ("shared/base.toml")
    inherited: bool  # set by a parent reached through ``extends``, not by the profile itself

    def note(self) -> str:
        """``inherited from profile 'pytorch'`` (a built-in) or ``... 'base' (shared/base.toml)``."""
        where = "" if self.file == f"builtin:{self.profile}" else f" ({self.file})"
        return f"inherited from profile {self.profile!r}{where}"


@dataclass(frozen=True, kw_only=True)
class Profile:
    __pydantic_config__ = INPUT  # read from outside: see envbuild.boundary

    name: str
    kind: Kind
    description: str = ""
    extends: str | None = None
    base: BaseSpec = BaseSpec()
    accelerator: AcceleratorSpec = AcceleratorSpec()
    python: PythonSpec = PythonSpec()
    torch: TorchSpec = TorchSpec()
    blender: BlenderSpec = BlenderSpec()
    system: SystemSpec = SystemSpec()
    env: dict[str, str] = field(default_factory=dict)
    resources: ResourcesSpec = ResourcesSpec()
    checks: tuple[CheckSpec, ...] = ()
    validate_: ValidateSpec = ValidateSpec()  # the profile's [validate] table
    app: AppSpec = AppSpec()

    # Provenance, filled by the loader.
    path: str  # the profile file ("builtin:pytorch" for built-ins)
    folder: str | None = None  # folder that relative paths resolve against (None for built-ins)
    sha256: str  # sha256 of the profile file bytes plus every file it pulls in (extends, requirements)
    sources: dict[str, str] = field(default_factory=dict)  # "python.version" -> "default" | "profile:<file>"
    #   | "extends:<file>" | "cli"
    # Which file set each key a file sets ("torch.packages[1]" per appended entry): for messages only.
    # Not hashed (sha256 covers the files' bytes) and not written to the lock (``sources`` is).
    origins: dict[str, Origin] = field(default_factory=dict)

    def inherited(self, key: str) -> Origin | None:
        """The parent that set ``key`` (``accelerator.version``, ``torch.packages[0]``), or None when the
        profile itself set it or nobody did (a default)."""
        origin = self.origins.get(key)
        return origin if origin is not None and origin.inherited else None


# --------------------------------------------------------------------------------------------------
# Catalog rows (output of envbuild.catalog)
# --------------------------------------------------------------------------------------------------


class Devices:
    """What a card is to the OS and torch: one device, or several (an MI250X is two GCDs of 64 GiB).

    Shared by catalog cards, plan cards and lock targets; the fields are the models' own."""

    memory_gib: float
    cards_per_lot: int
    devices_per_card: int
    device_memory_gib: float | None

    @property
    def memory_per_device(self) -> float:
        """GiB of one device as the OS and torch see it (a whole card unless it has several)."""
        return self.device_memory_gib if self.device_memory_gib is not None else self.memory_gib

    @property
    def devices_per_lot(self) -> int:
        return self.cards_per_lot * self.devices_per_card


@dataclass(frozen=True, kw_only=True)
class Card(Devices):
    id: str  # "h100", "b200", "rtx4090", "mi300x", "cpu"
    name: str
    vendor: Vendor
    arch: str  # "sm_90", "gfx942", "" for cpu
    memory_gib: float
    cards_per_lot: int = 1
    bf16_tflops: float | None = None
    bandwidth_gbs: float | None = None
    min_cuda: str | None = None
    min_rocm: str | None = None
    min_driver: str | None = None
    source: str
    devices_per_card: int = 1  # devices the OS and torch see per card (MI250X: 2 GCDs)
    device_memory_gib: float | None = None  # GiB per device; None: the whole card is one device


@dataclass(frozen=True, kw_only=True)
class LotPrice:
    """The price of one lot of a card (every card of the lot) for a duration, with where it came from."""

    card: str  # card id
    days: int
    usd: float
    source: str  # "IteraGPU rate, provider guide ..." or the user's price file's own `source`
    date: str  # when the price was read: "2026-12" or "2026-12-15"


# --------------------------------------------------------------------------------------------------
# Plan (output of envbuild.plan)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Finding:
    severity: Severity
    code: str  # stable, e.g. "E-ARCH-MISSING", "W-DRIVER-UNKNOWN"
    message: str  # what is wrong and what to write instead; no internal citations
    source: str | None = None  # where the facts behind it come from (catalog row, metadata, URL)


@dataclass(frozen=True, kw_only=True)
class IndexUrl:
    url: str
    reason: str
    primary: bool = False  # --index-url (True) or --extra-index-url (False)


@dataclass(frozen=True, kw_only=True)
class Pin:
    name: str  # canonical project name
    version: str  # "2.7.1"
    local: str | None = None  # "cu128", "rocm6.3", "cpu"
    reason: str  # provenance: "torch release 2.7.1, variant cu128 (catalog: ...)"

    @property
    def spec(self) -> str:
        return f"{self.name}=={self.version}" + (f"+{self.local}" if self.local else "")


@dataclass(frozen=True, kw_only=True)
class Plan:
    __pydantic_config__ = INPUT  # read from outside: see envbuild.boundary

    profile: Profile
    targets: tuple[Card, ...]
    os: OsId
    os_name: str  # "Ubuntu 24.04"
    base_image: str  # derived or explicit
    base_flavor: str  # "os", "cuda-runtime", "cuda-devel", "rocm-dev", "rocm-complete", "explicit"
    python_version: str
    python_provision: str  # "system" (distro python3) | "deadsnakes" | "base-image"
    backend: Backend
    accelerator_version: str | None  # "12.8" | "6.3" | None
    torch_variant: str | None  # "cu128" | "rocm6.3" | "cpu" | None when no torch
    torch_version: str | None
    index_urls: tuple[IndexUrl, ...]
    pins: tuple[Pin, ...]  # torch family, exact with local tag
    requirements: tuple[RequirementLine, ...]  # the user's, after pins
    apt: tuple[str, ...]  # sorted, deduplicated
    torch_arch_list: tuple[str, ...]  # what the wheel carries: ("sm_75", ..., "sm_120+PTX")
    required_archs: tuple[str, ...]  # what the targets need
    min_driver: str | None  # NVIDIA Linux driver minimum for the variant
    compiles: bool  # something is compiled in the image (toolchain present, devel base)
    blender_version: str | None
    blender_url: str | None
    blender_sha256_url: str | None
    blender_source: BlenderSource | None = None  # None: no Blender
    days: int | None = None  # the rental duration chosen (--days); None: every duration is shown
    prices: tuple[LotPrice, ...] = ()  # lot prices known for the targets (built-in, then --prices)
    # (package, version) recorded by a first build (render --apt-from RECORD): unpinned apt packages of
    # the image are installed at exactly these versions.
    apt_recorded: tuple[tuple[str, str], ...] = ()
    # [system] snapshot: the instant, and the apt sources lines reading it (the archive URL as
    # ${APT_SNAPSHOT_MIRROR}, a build argument); () without a snapshot.
    apt_snapshot: str | None = None
    apt_sources: tuple[str, ...] = ()
    apt_snapshot_url: str | None = None  # the service (APT_SNAPSHOT_MIRROR's default)


@dataclass(frozen=True, kw_only=True)
class CheckResult:
    plan: Plan
    findings: tuple[Finding, ...]

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)


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
    # credentials as ${ENVBUILD_INDEX_N_USER}-style references (envbuild/lockurls.py), never values
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
    packages: tuple[LockPackage, ...]  # exact pins first (torch family), then the user's
    apt: tuple[str, ...]
    apt_snapshot: str | None = None  # [system] snapshot: the archive instant apt read at build time
    env: dict[str, str]  # secret-looking values are never stored
    checks: tuple[CheckSpec, ...]
    extensions: tuple[str, ...]
    compile_extensions: bool
    checkpoint_dir: str
    workdir: str = WORKDIR_IN_IMAGE
    blender_version: str | None = None
    blender_devices: tuple[BlenderDevice, ...] = ()
    blender_source: BlenderSource | None = None  # how Blender is installed (None: no Blender, or an old lock)
    # The resolver's input, as declared: index URLs, every requirement line (torch-family pins first,
    # then the profile's lines with their origins, duplicates kept) and the bundle's constraint copies.
    index_urls: tuple[IndexUrl, ...] = ()
    declared: tuple[RequirementLine, ...] = ()
    constraint_files: tuple[str, ...] = ()  # "constraints/01-constraints.txt", relative to the bundle
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
