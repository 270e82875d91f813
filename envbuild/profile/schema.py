"""The profile schema: which keys exist, their types, and the check each value must pass.

:func:`check_document` checks one parsed TOML file on its own (unknown keys with a did-you-mean, wrong
types, bad enums with the valid choices, every string through :mod:`envbuild.profile.fields`) and
returns a *clean* copy holding only the values that passed, so that merging never sees bad data and
every problem is reported once, against the file that holds it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, get_args

from envbuild.errors import Issue, choices
from envbuild.models import Backend, BlenderDevice, BlenderSource, Builder, Kind, OsId
from envbuild.profile import fields as f
from envbuild.profile.pep508 import LineError, parse_requirement

Check = Callable[[Any], str | None]
MAX_LIST = 512


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


def _json_key(value: str) -> str | None:
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
TYPE_WORDS = {
    "str": "a string",
    "int": "an integer",
    "number": "a number",
    "bool": "true or false",
    "list": "a list of strings",
    "strmap": "a table of strings",
    "jsonmap": "a table of 'FILE.json:key' = value",
}
ALL_KEYS = [*TOP, *TABLES, "env", "checks"]
ALLOW_NAMES = "allow_names"  # [env] allow_names = [...]: names the user vouches for (not secrets)
ENV_ALLOW_NAMES = "env_allow_names"  # where a checked document keeps them (the loader takes them out)


def _type_ok(kind: str, value: Any) -> bool:
    if kind == "str":
        return isinstance(value, str)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "list":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return isinstance(value, dict)


class _Checker:
    def __init__(self, file: str) -> None:
        self.file = file
        self.issues: list[Issue] = []

    def add(self, key: str, message: str) -> None:
        self.issues.append(Issue(self.file, key, message))

    def value(self, key: str, spec: Spec, value: Any) -> tuple[bool, Any]:
        if not _type_ok(spec.type, value):
            self.add(key, f"must be {TYPE_WORDS[spec.type]}, got {type(value).__name__} {_short(value)}")
            return False, None
        if spec.type == "list":
            if len(value) > MAX_LIST:
                self.add(key, f"has {len(value)} entries, at most {MAX_LIST}")
                return False, None
            ok = True
            for i, item in enumerate(value):
                problem = spec.check(item) if spec.check else None
                if problem is None and spec.unique and item in value[:i]:
                    problem = f"{item!r} is listed twice (also at [{value.index(item)}])"
                if problem:
                    self.add(f"{key}[{i}]", problem)
                    ok = False
            return ok, list(value)
        if spec.type == "jsonmap":
            return self.jsonmap(key, value)
        problem = spec.check(value) if spec.check else None
        if problem:
            self.add(key, problem)
            return False, None
        return True, value

    def jsonmap(self, key: str, value: dict[str, Any]) -> tuple[bool, Any]:
        ok = True
        for k, v in value.items():
            problem = _json_key(k)
            scalar = isinstance(v, str | int | float) and not (isinstance(v, float) and not math.isfinite(v))
            if problem is None and (not scalar or (isinstance(v, str) and f.has_control(v))):
                problem = "expected value must be a string, number or boolean without control characters"
            if problem:
                self.add(f"{key}.{_keyname(k)}", problem)
                ok = False
        return ok, dict(value)

    def table(self, prefix: str, raw: Any, specs: dict[str, Spec]) -> dict[str, Any]:
        if not isinstance(raw, dict):
            self.add(prefix, f"must be a table, got {type(raw).__name__}")
            return {}
        clean: dict[str, Any] = {}
        for key, value in raw.items():
            where = f"{prefix}.{_keyname(key)}" if prefix else _keyname(key)
            if key not in specs:
                self.add(where, f"unknown key{f.did_you_mean(key, specs)}; valid keys: {choices(specs)}")
                continue
            ok, cleaned = self.value(where, specs[key], value)
            if ok:
                clean[key] = cleaned
        return clean

    def allow_names(self, raw: dict[str, Any]) -> tuple[str, ...]:
        """``[env] allow_names``: names of this table that look like secrets but are not (the user
        vouches for them); each must be a variable of the same table."""
        names = raw.get(ALLOW_NAMES, [])
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            self.add(
                f"env.{ALLOW_NAMES}",
                'must be a list of variable names of this [env] table, e.g. ["MY_KEY_ID"]',
            )
            return ()
        valid = [key for key in raw if key != ALLOW_NAMES]
        for index, name in enumerate(names):
            if name not in valid:
                self.add(
                    f"env.{ALLOW_NAMES}[{index}]",
                    f"{_short(name)} is not a variable of this [env] table{f.did_you_mean(name, valid)}; "
                    f"allow_names lists variables set here: {choices(valid) if valid else '(none)'}",
                )
        return tuple(dict.fromkeys(names))

    def env(self, raw: Any) -> tuple[dict[str, str], tuple[str, ...]]:
        if not isinstance(raw, dict):
            self.add("env", f"must be a table, got {type(raw).__name__}")
            return {}, ()
        allowed = self.allow_names(raw)
        clean: dict[str, str] = {}
        for key, value in raw.items():
            if key == ALLOW_NAMES:
                continue
            where = f"env.{_keyname(key)}"
            problem = f.check_env_key(key, value if isinstance(value, str) else None, allowed)
            if problem is None and not isinstance(value, str):
                problem = f'must be a string, got {type(value).__name__} (quote it: {key} = "{value}")'
            if problem is None:
                problem = f.check_env_value(value)
            if problem:
                self.add(where, problem)
            else:
                clean[key] = value
        return clean, allowed

    def checks(self, raw: Any) -> list[dict[str, Any]]:
        if not isinstance(raw, list) or not all(isinstance(c, dict) for c in raw):
            self.add("checks", "must be an array of tables ([[checks]])")
            return []
        clean: list[dict[str, Any]] = []
        seen: set[str] = set()
        for i, item in enumerate(raw):
            before = len(self.issues)
            entry = self.table(f"checks[{i}]", item, CHECK)
            for required in ("name", "run"):
                if required not in item:
                    self.add(f"checks[{i}].{required}", "is required")
            if "run" in entry and (not entry["run"] or not entry["run"][0].strip()):
                self.add(f"checks[{i}].run", "must be a non-empty argv list like ['python', 'src/pilot.py']")
            name = entry.get("name")
            if name in seen:
                self.add(f"checks[{i}].name", f"duplicate check name {name!r} in this file")
            if len(self.issues) == before:
                seen.add(str(name))
                clean.append(entry)
        return clean


def _keyname(key: str) -> str:
    safe = key.replace("_", "").replace("-", "").isalnum() and key.isascii()
    return key if safe else repr(key)


def _short(value: Any) -> str:
    try:
        text = repr(value)
    except ValueError:  # an int with more digits than Python converts to text
        return "(a number too long to show)"
    return text if len(text) <= 60 else text[:57] + "..."


def check_document(file: str, raw: dict[str, Any]) -> tuple[dict[str, Any], list[Issue]]:
    """Check one TOML document; return the clean values and every issue found."""
    checker = _Checker(file)
    clean: dict[str, Any] = {}
    for key, value in raw.items():
        if key in TOP:
            ok, cleaned = checker.value(_keyname(key), TOP[key], value)
            if ok:
                clean[key] = cleaned
        elif key in TABLES:
            clean[key] = checker.table(key, value, TABLES[key])
        elif key == "env":
            clean[key], allowed = checker.env(value)
            if allowed:
                clean[ENV_ALLOW_NAMES] = allowed
        elif key == "checks":
            clean[key] = checker.checks(value)
        else:
            checker.add(
                _keyname(key), f"unknown key{f.did_you_mean(key, ALL_KEYS)}; valid keys: {choices(ALL_KEYS)}"
            )
    return clean, checker.issues


def allowed_env_names(layers: list[Any], merged: Any) -> tuple[str, ...]:
    """Every ``[env] allow_names`` of a profile's files (``layers``: each one's ``doc``), each checked
    against its own file's names; taken out of the merge's bookkeeping (``merged``: sources, owners)."""
    merged.sources.pop(ENV_ALLOW_NAMES, None), merged.owner.pop(ENV_ALLOW_NAMES, None)
    return tuple(sorted({name for layer in layers for name in layer.doc.get(ENV_ALLOW_NAMES, ())}))
