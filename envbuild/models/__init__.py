"""Typed, frozen models shared by the stages, one module per stage that produces them.

After loading there are no loose dicts: ``profile`` produces a :class:`Profile`
(:mod:`envbuild.models.profile`), ``plan`` a :class:`Plan` (plus :class:`Finding` s,
:mod:`envbuild.models.plan`, with the cards and prices of :mod:`envbuild.models.cards`), ``render``
writes a :class:`Lock` that ``validate`` reads (:mod:`envbuild.models.lock`).
The lock's JSON schema is the contract between the "before ordering" and "on arrival" halves;
bump :data:`LOCK_FORMAT` when it changes incompatibly.

Every model is importable from here (``from envbuild.models import Plan``).
"""

from __future__ import annotations

from envbuild.models.cards import (
    Card,
    Devices,
    LotPrice,
    Vendor,
)
from envbuild.models.lock import (
    IMAGE_USER,
    INPUTS_FILE,
    INPUTS_FORMAT,
    LOCAL_FOLDER,
    LOCK_FORMAT,
    LOCK_PATH_IN_IMAGE,
    PROBE_OPS_IN_IMAGE,
    PYTHON_IN_IMAGE,
    TOOL_VENV_IN_IMAGE,
    TOOLKIT_IN_BUILDER,
    VENV_PATH_IN_IMAGE,
    WORKDIR_IN_IMAGE,
    BundleInputs,
    Lock,
    LockedDistribution,
    LockedFile,
    LockPackage,
    LockResolution,
    LockTarget,
    read_lock,
)
from envbuild.models.plan import (
    CheckResult,
    Finding,
    IndexUrl,
    Pin,
    Plan,
    Severity,
)
from envbuild.models.profile import (
    AcceleratorSpec,
    AppSpec,
    Backend,
    BaseSpec,
    BlenderDevice,
    BlenderSource,
    BlenderSpec,
    Builder,
    CheckSpec,
    Kind,
    Origin,
    OsId,
    Profile,
    PythonSpec,
    RequirementLine,
    ResourcesSpec,
    SystemSpec,
    TorchSpec,
    ValidateSpec,
)

__all__ = [
    "IMAGE_USER",
    "INPUTS_FILE",
    "INPUTS_FORMAT",
    "LOCAL_FOLDER",
    "LOCK_FORMAT",
    "LOCK_PATH_IN_IMAGE",
    "PROBE_OPS_IN_IMAGE",
    "PYTHON_IN_IMAGE",
    "TOOLKIT_IN_BUILDER",
    "TOOL_VENV_IN_IMAGE",
    "VENV_PATH_IN_IMAGE",
    "WORKDIR_IN_IMAGE",
    "AcceleratorSpec",
    "AppSpec",
    "Backend",
    "BaseSpec",
    "BlenderDevice",
    "BlenderSource",
    "BlenderSpec",
    "Builder",
    "BundleInputs",
    "Card",
    "CheckResult",
    "CheckSpec",
    "Devices",
    "Finding",
    "IndexUrl",
    "Kind",
    "Lock",
    "LockPackage",
    "LockResolution",
    "LockTarget",
    "LockedDistribution",
    "LockedFile",
    "LotPrice",
    "Origin",
    "OsId",
    "Pin",
    "Plan",
    "Profile",
    "PythonSpec",
    "RequirementLine",
    "ResourcesSpec",
    "Severity",
    "SystemSpec",
    "TorchSpec",
    "ValidateSpec",
    "Vendor",
    "read_lock",
]
