"""The profile's keys: each one's type, the check each value must pass, and its documentation.

:data:`TOP`, :data:`TABLES` and :data:`CHECK` are the one definition of the profile's keys: the checker
(:mod:`envbuild.profile.schema`), the merge of ``extends`` (:mod:`envbuild.profile.merge`) and
``envbuild schema`` (:mod:`envbuild.profile.jsonschema`) are derived from them, and a test holds the
typed model (:class:`envbuild.models.Profile`) to them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, get_args

from envbuild.errors import choices
from envbuild.models import Backend, BlenderDevice, BlenderSource, Builder, Kind, OsId
from envbuild.profile import fields as f
from envbuild.profile.pep508 import LineError, parse_requirement

Check = Callable[[Any], str | None]
MAX_LIST = 512
MAX_HOURS = 87600  # ten years: a bound for editors, not a rental limit


def _enum(valid: tuple[str, ...], what: str) -> Check:
    def check(value: str) -> str | None:
        if value in valid:
            return None
        return f"{value!r} is not a valid {what}{f.did_you_mean(value, valid)}; valid: {choices(valid)}"

    return check


def _requirement(value: str) -> str | None:
    try:
        parse_requirement(value)
    except LineError as exc:
        return str(exc)
    return None


def _companion(value: str) -> str | None:
    problem = _requirement(value)
    if problem is None and "@" in value:
        return "torch companions are names or pins (e.g. 'torchvision'), not URLs; URLs go in python.packages"
    return problem


def _range(low: float, high: float, *, strict_low: bool = False) -> Check:
    def check(value: float) -> str | None:
        if not math.isfinite(value) or (value <= low if strict_low else value < low) or value > high:
            bound = f"> {low:g}" if strict_low else f">= {low:g}"
            return f"must be {bound} and <= {high:g}, got {value!r}"
        return None

    return check


def _extends(value: str) -> str | None:
    if "://" in value or value.startswith(("http:", "https:", "file:")):
        return (
            f"{value!r} is a URL: extends takes a built-in profile name or a .toml path relative to this file"
        )
    if "/" in value or value.endswith(".toml"):
        return f.check_rel_path(value)
    return f.check_name(value, what="built-in profile name")


def _argv_item(value: str) -> str | None:
    return f.check_text(value, max_len=4096, allow_tab=True)


def json_key_problem(value: str) -> str | None:
    path, sep, key = value.rpartition(":")
    if not sep or not path or not key:
        return f"{value!r} must be 'FILE.json:dotted.key'"
    return f.check_rel_path(path) or (
        None if f.JSON_KEY_RE.fullmatch(key) else f"{key!r} is not a dotted key"
    )


@dataclass(frozen=True)
class Spec:
    """One profile key: its type, the check each value must pass, and what the JSON Schema and the merge
    of ``extends`` need to know.  This table is the one definition of the profile's keys: the merge
    (:mod:`envbuild.profile.merge`) and ``envbuild schema`` are derived from it, and a test holds the
    typed model (:class:`envbuild.models.Profile`) to it."""

    type: str  # "str", "int", "number", "bool", "list", "strmap", "jsonmap"
    check: Check | None = None  # for lists and maps: applied to each item / value
    unique: bool = False  # lists: an entry listed twice is an error (it would be built or tested twice)
    doc: str = ""  # one line for editors (JSON Schema description)
    choices: tuple[str, ...] = ()  # a closed set (JSON Schema enum)
    bounds: tuple[float, float] | None = None  # inclusive range (JSON Schema minimum/maximum)
    append: bool = False  # lists: a child's entries are appended to its parent's (else they replace)
    canonical: bool = False  # lists of distribution names: kept PEP 503-normalised (``Flash_Attn`` ->
    #   ``flash-attn``), so that a name listed twice in two spellings is a duplicate


KIND_CHOICES: tuple[str, ...] = get_args(Kind)
OS_CHOICES: tuple[str, ...] = get_args(OsId)
BACKEND_CHOICES: tuple[str, ...] = get_args(Backend)
DEVICE_CHOICES: tuple[str, ...] = get_args(BlenderDevice)
BLENDER_SOURCE_CHOICES: tuple[str, ...] = get_args(BlenderSource)


def _choice(
    valid: tuple[str, ...], what: str, doc: str, *, list_of: bool = False, unique: bool = False
) -> Spec:
    return Spec("list" if list_of else "str", _enum(valid, what), unique=unique, doc=doc, choices=valid)


def _number(kind: str, low: float, high: float, doc: str, *, strict_low: bool = False) -> Spec:
    return Spec(kind, _range(low, high, strict_low=strict_low), doc=doc, bounds=(low, high))


_ALLOW_OLD_DOC = (
    "Directly named distributions that `envbuild lock` may lock more than one minor series behind the "
    "newest release (else it refuses), e.g. ['vllm']."
)
_SOURCE_DOC = "Distributions built from their sdist in the image's builder stage (e.g. 'flash-attn')."
TOP: dict[str, Spec] = {
    "name": Spec("str", f.check_profile_name, doc="The profile's name; also the image name envbuild/<name>."),
    "kind": _choice(KIND_CHOICES, "kind", "The preparation: ubuntu, pytorch, blender or custom."),
    "extends": Spec("str", _extends, doc="A built-in profile name or a .toml path (relative to this file)."),
    "description": Spec("str", lambda v: f.check_text(v, max_len=500), doc="One line for the README."),
}
TABLES: dict[str, dict[str, Spec]] = {
    "base": {
        "os": _choice(OS_CHOICES, "base.os", "The distribution of the image."),
        "image": Spec("str", f.check_image, doc="A base image to use instead of the derived one."),
        "builder": _choice(get_args(Builder), "base.builder", "CUDA's compiler: auto or devel-image."),
    },
    "accelerator": {
        "backend": _choice(BACKEND_CHOICES, "backend", "cuda, rocm or cpu."),
        "version": Spec("str", f.check_accel_version, doc="CUDA or ROCm version, e.g. '12.8' or '6.3'."),
        "targets": Spec(
            "list", f.check_target, unique=True, doc="Card ids (see `envbuild targets`), e.g. ['h100']."
        ),
    },
    "python": {
        "version": Spec("str", f.check_python_version, doc="MAJOR.MINOR, e.g. '3.12'."),
        "packages": Spec("list", _requirement, doc="Requirement lines (PEP 508, pip options).", append=True),
        "requirements": Spec(
            "list", f.check_rel_path, doc="requirements files, relative to this profile.", append=True
        ),
        "build_from_source": Spec("list", f.check_project_name, unique=True, append=True, doc=_SOURCE_DOC),
        "allow_old": Spec(
            "list", f.check_project_name, unique=True, append=True, canonical=True, doc=_ALLOW_OLD_DOC
        ),
    },
    "torch": {
        "version": Spec(
            "str",
            lambda v: f.check_pep440(v, what="torch version"),
            doc="A torch release or series, e.g. '2.7.1'.",
        ),
        "packages": Spec(
            "list", _companion, doc="Companions: torchvision, torchaudio (pinned to match).", append=True
        ),
    },
    "blender": {
        "version": Spec("str", f.check_blender_version, doc="A Blender release, e.g. '4.5.15'."),
        "devices": _choice(
            DEVICE_CHOICES, "Blender device", "Cycles devices to render on.", list_of=True, unique=True
        ),
        "source": _choice(
            BLENDER_SOURCE_CHOICES, "blender.source", "official (the tarball) or pypi (the bpy module)."
        ),
    },
    "system": {
        "apt": Spec("list", f.check_apt, doc="Debian packages, optionally =VERSION.", append=True),
        "snapshot": Spec(
            "str",
            f.check_snapshot,
            doc="Read the Debian/Ubuntu archive as it was at this UTC instant, YYYYMMDDTHHMMSSZ "
            "(snapshot.debian.org, snapshot.ubuntu.com).",
        ),
    },
    "resources": {
        "gpu_memory_gib": _number(
            "number", 0, 16384, "Peak memory the job needs on each GPU, GiB.", strict_low=True
        ),
        "gpus": _number("int", 1, 64, "GPUs the job uses at once."),
        "memory_gib": _number("number", 0, 65536, "Host memory the job needs, GiB.", strict_low=True),
        "cpus": _number("number", 0, 4096, "CPU cores the job needs.", strict_low=True),
        "network_gbps": _number("number", 0, 1e5, "Gbit/s between lots (validate --fleet).", strict_low=True),
    },
    "order": {
        "hours": _number(
            "number",
            0,
            MAX_HOURS,
            "Hours the job needs on the rented machine (the order summary).",
            strict_low=True,
        ),
    },
    "validate": {
        "extensions": Spec(
            "list", f.check_module, doc="Modules with compiled extensions to smoke-test.", append=True
        ),
        "probe_ops": Spec("bool", doc="Build validate's C++/CUDA op with the image; run it on arrival."),
        "compile_extensions": Spec("bool", doc="Also compile that op on arrival (keeps a toolchain)."),
        "torch_compile": Spec(
            "bool", doc="The job uses torch.compile: keep a C compiler, try it on arrival."
        ),
        "checkpoint_dir": Spec("str", f.check_rel_path, doc="Where validate's checkpoint round trip writes."),
    },
    "app": {
        "source": Spec(
            "str",
            lambda v: None if v == "." else f.check_rel_path(v),
            doc="The application folder copied into the image ('.' for this profile's folder).",
        ),
    },
}
CHECK: dict[str, Spec] = {
    "name": Spec("str", lambda v: f.check_name(v, what="check name"), doc="The check's name (unique)."),
    "run": Spec("list", _argv_item, doc="The command, as an argument list."),
    "timeout_s": _number("int", 1, 86400, "Seconds before the check is killed."),
    "expect_exit": _number("int", 0, 255, "The exit status it must return."),
    "expect_files": Spec("list", f.check_rel_path, doc="Files it must leave behind."),
    "expect_json": Spec("jsonmap", None, doc="'FILE.json:dotted.key' = expected value."),
}
