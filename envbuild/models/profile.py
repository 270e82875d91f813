"""The profile as loaded (the output of :mod:`envbuild.profile`): every table typed and frozen."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from envbuild.boundary import INPUT

Backend = Literal["cuda", "rocm", "cpu"]
Kind = Literal["ubuntu", "pytorch", "blender", "custom"]
OsId = Literal["ubuntu22.04", "ubuntu24.04", "debian12"]
BlenderDevice = Literal["CPU", "CUDA", "OPTIX", "HIP", "ONEAPI"]
BlenderSource = Literal["official", "pypi"]  # the official Linux tarball, or the bpy module from the index
# Where the builder stage gets CUDA's compiler: "auto" (nvcc from the package index for CUDA 13, nvidia/cuda's
# devel image for CUDA 11/12), or "devel-image" (always the devel image: more of the toolkit than the wheels)
Builder = Literal["auto", "devel-image"]


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
    builder: Builder = "auto"  # the builder stage's CUDA compiler (envbuild.plan.builder_image)


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
    # distributions allowed to be built from their sdist in the image's builder stage (PEP 503 names)
    build_from_source: tuple[str, ...] = ()
    # directly named distributions that ``envbuild lock`` may lock more than one minor series behind the
    # newest release (it refuses that otherwise); PEP 503-normalised
    allow_old: tuple[str, ...] = ()


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
    network_gbps: float | None = None  # network between lots (Gbit/s): validate --fleet judges it


@dataclass(frozen=True, kw_only=True)
class OrderSpec:
    """The profile's ``[order]`` table: what the renter orders beyond the cards."""

    hours: float | None = None  # hours the job needs on the rented machine


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
    # The validator's own C++ op (and CUDA/HIP op on a GPU backend), compiled in the image's builder
    # stage against its torch and run on arrival with no compiler.
    probe_ops: bool = True
    compile_extensions: bool = False  # also compile the ops on arrival: the final image keeps a toolchain
    torch_compile: bool = False  # the workload uses torch.compile: keep a C compiler, run one on arrival
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
    # [env] allow_names: names of ``env`` that look like secrets and that the user vouches for
    env_allow_names: tuple[str, ...] = ()
    resources: ResourcesSpec = ResourcesSpec()
    order: OrderSpec = OrderSpec()
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
