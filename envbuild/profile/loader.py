"""Find, read, check and merge a profile into a frozen :class:`~envbuild.models.Profile`."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envbuild.compat import tomllib
from envbuild.errors import BundleError, Issue, ProfileError, UsageError, choices
from envbuild.models import (
    AcceleratorSpec,
    AppSpec,
    BaseSpec,
    BlenderSpec,
    CheckSpec,
    OrderSpec,
    Origin,
    Profile,
    PythonSpec,
    RequirementLine,
    ResourcesSpec,
    SystemSpec,
    TorchSpec,
    ValidateSpec,
)
from envbuild.profile import requirements
from envbuild.profile.appdir import collect_app
from envbuild.profile.fields import did_you_mean, line_break, secret_value_problems
from envbuild.profile.merge import Merged, merge
from envbuild.profile.paths import Place, PlaceError, builtin_place, root_place
from envbuild.profile.places import clipped, pending_of_document
from envbuild.profile.schema import CHECK, TABLES, Spec, allowed_env_names, check_document
from envbuild.resources import profiles_dir

MAX_DEPTH = 16


def builtin_names() -> list[str]:
    """Sorted names of the built-in profiles (``profiles/*.toml``)."""
    return sorted(p.stem for p in profiles_dir().glob("*.toml") if p.is_file())


REQUIREMENTS_HINT = (
    "; this looks like a pip requirements file, not a profile: list it in a profile's "
    '[python] requirements = ["FILE"] (a profile can extend a built-in, e.g. extends = "pytorch"; '
    "see profiles/README.md)"
)


def _looks_like_requirements(name: str, data: bytes) -> bool:
    """A file that is not TOML, named like a requirements file (``.txt``, ``.in``) or whose lines are all
    requirements, pip options or comments."""
    from packaging.requirements import InvalidRequirement, Requirement

    if name.endswith((".txt", ".in")):
        return True
    lines = [line.split(" #", 1)[0].strip() for line in data.decode("utf-8", "replace").splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    try:
        for line in lines:
            if not line.startswith("-"):
                Requirement(line)
    except InvalidRequirement:
        return False
    return bool(lines)


def _is_builtin_ref(ref: str) -> bool:
    return "/" not in ref and "\\" not in ref and not ref.endswith(".toml")


@dataclass
class _Layer:
    place: Place
    ident: str  # "builtin:pytorch" or the root-relative label
    doc: dict[str, Any]


@dataclass
class _Load:
    issues: list[Issue] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)  # label -> bytes, in first-read order
    broken: bool = False  # the extends chain could not be followed to its end

    def record(self, place: Place, data: bytes) -> None:
        self.files.setdefault(place.label, data)

    def sha256(self) -> str:
        digest = hashlib.sha256()
        for label, data in self.files.items():
            digest.update(f"{label}\0{len(data)}\0".encode())
            digest.update(data)
        return digest.hexdigest()

    def read_layer(self, place: Place, ident: str) -> _Layer | None:
        try:
            data = place.read()
        except PlaceError as exc:
            self.issues.append(Issue(place.display, "", str(exc)))
            return None
        self.record(place, data)
        try:
            raw = tomllib.loads(data.decode("utf-8-sig"))  # tolerate a BOM from Windows editors
        except UnicodeDecodeError as exc:
            self.issues.append(Issue(place.display, "", f"not UTF-8 text: {exc.reason} at byte {exc.start}"))
            return None
        except tomllib.TOMLDecodeError as exc:
            hint = REQUIREMENTS_HINT if _looks_like_requirements(place.display, data) else ""
            self.issues.append(Issue(place.display, "", f"not valid TOML: {exc}{hint}"))
            return None
        except RecursionError:
            self.issues.append(
                Issue(place.display, "", "not a usable profile: arrays or tables nest too deeply")
            )
            return None
        except ValueError as exc:  # e.g. an integer with more digits than Python converts
            self.issues.append(Issue(place.display, "", f"not a usable profile: {exc}"))
            return None
        doc, issues = check_document(place.display, raw)
        self.issues.extend(issues)
        found = secret_value_problems(raw, skip=(i.key for i in issues))  # the secret policy, every value
        self.issues.extend(Issue(place.display, key, message) for key, message in found)
        return _Layer(place, ident, doc)

    def parent_place(self, layer: _Layer, ref: str) -> tuple[Place, str] | None:
        if _is_builtin_ref(ref):
            names = builtin_names()
            if ref not in names:
                message = (
                    f"no built-in profile {ref!r}{did_you_mean(ref, names)}; built-ins: {choices(names)}"
                )
                self.issues.append(Issue(layer.place.display, "extends", message))
                return None
            return builtin_place(profiles_dir(), ref), f"builtin:{ref}"
        try:
            place = layer.place.child(ref)
        except PlaceError as exc:
            self.issues.append(Issue(layer.place.display, "extends", str(exc)))
            return None
        return place, place.label

    def chain(self, root: Place, ident: str) -> list[_Layer]:
        """The profile and its parents, nearest first; ``broken`` when a parent could not be followed."""
        first = self.read_layer(root, ident)
        if first is None:
            return []
        layers = [first]
        seen = [first.place.path.resolve()]
        self.broken = any(i.key == "extends" for i in self.issues)  # an invalid extends value
        while (ref := layers[-1].doc.get("extends")) is not None:
            self.broken = True  # until the parent is read
            found = self.parent_place(layers[-1], ref)
            if found is None:
                break
            place, parent_ident = found
            resolved = place.path.resolve()
            if resolved in seen:
                names = " -> ".join([*(layer.ident for layer in layers), parent_ident])
                self.issues.append(Issue(layers[-1].place.display, "extends", f"extends cycle: {names}"))
                break
            if len(layers) >= MAX_DEPTH:
                message = f"extends chain is deeper than {MAX_DEPTH} files"
                self.issues.append(Issue(layers[-1].place.display, "extends", message))
                break
            layer = self.read_layer(place, parent_ident)
            if layer is None:
                break
            seen.append(resolved)
            layers.append(layer)
            self.broken = any(i.key == "extends" for i in self.issues)
        return layers


def _locate(ref: str) -> tuple[Place, str, bool]:
    if _is_builtin_ref(ref) and ref in builtin_names():
        return builtin_place(profiles_dir(), ref), f"builtin:{ref}", True
    path = Path(ref)
    try:
        exists = "\0" not in ref and path.is_file()
    except OSError:
        exists = False
    if not exists:
        names = builtin_names()
        hint = did_you_mean(ref, names) if _is_builtin_ref(ref) else ""
        shown = ref if ref.isprintable() else repr(ref)
        what = "no such profile file or built-in profile"
        if _is_dir(path):
            what = "is a folder, not a profile file"
        message = f"{what}{hint}; built-ins: {choices(names)}"
        raise UsageError(f"{shown}: {message}")
    place = root_place(path, ref if ref.isprintable() else repr(ref))
    found = line_break(ref) or line_break(str(place.path))
    if found is not None:  # the path is recorded in comments of the files render writes (issue 25)
        raise UsageError(
            f"{place.display}: the profile's path holds the line break {found!r}, which would start a new "
            "line in the files envbuild writes (pip reads such a line of requirements-rebuild.txt as an "
            "option); rename the folder or file"
        )
    return place, place.label, False


def _is_dir(path: Path) -> bool:
    try:
        return "\0" not in str(path) and path.is_dir()
    except OSError:
        return False


def load_profile(ref: str | os.PathLike[str]) -> Profile:
    """Load a built-in name or a ``.toml`` path; raise :class:`ProfileError` with every problem.

    A missing file or unknown built-in name raises :class:`~envbuild.errors.UsageError`.
    """
    ref = os.fspath(ref)
    place, ident, builtin = _locate(ref)
    load = _Load()
    layers = load.chain(place, ident)
    if not layers:
        raise ProfileError(clipped(load.issues))
    ordered = list(reversed(layers))
    refs = _rebase_requirements(ordered, builtin)
    origins = [f"extends:{layer.ident}" for layer in ordered[:-1]] + [f"profile:{ident}"]
    merged = merge([(origin, layer.doc) for origin, layer in zip(origins, ordered, strict=True)])
    root = ordered[-1]
    for key in ("name", "kind"):  # not when a parent could not be read: it may have set them
        if key not in merged.data and not load.broken and not any(i.key == key for i in load.issues):
            load.issues.append(Issue(root.place.display, key, "is required (in the profile or a parent)"))
    lines = _requirement_lines(merged, refs, load, ordered[-1])
    app = _app_source(merged, ordered, load)
    if load.issues:  # with what only the catalog can judge, checked where it is reported (places.py)
        found = pending_of_document(merged.data, lambda key: ordered[merged.owner.get(key, -1)].place.display)
        raise ProfileError(clipped(load.issues), pending=found)
    data = dict(merged.data)
    data.setdefault("python", {})["lines"] = lines
    if app is not None:
        data["app"] = {"source": app}
    data.update(extends=root.doc.get("extends"), env_allow_names=allowed_env_names(ordered, merged))
    data["path"] = ident if builtin else str(place.path)
    data["folder"] = None if builtin else str(place.path.parent)
    data["sha256"] = load.sha256()
    data["sources"] = dict(sorted(merged.sources.items()))
    data["origins"] = _origins(merged, ordered)
    try:
        return _typed(data)
    except TypeError as exc:  # a gap between the schema and the model: report, don't crash
        raise ProfileError(
            [Issue(root.place.display, "", f"does not fit the profile model: {exc}")]
        ) from None


# The typed model of each table of the schema (:data:`~envbuild.profile.schema.TABLES`).
TABLE_MODELS: dict[str, type[Any]] = {
    "base": BaseSpec,
    "accelerator": AcceleratorSpec,
    "python": PythonSpec,
    "torch": TorchSpec,
    "blender": BlenderSpec,
    "system": SystemSpec,
    "resources": ResourcesSpec,
    "order": OrderSpec,
    "validate": ValidateSpec,
    "app": AppSpec,
}


def _typed(data: dict[str, Any]) -> Profile:
    """The merged document as a :class:`Profile`.  :func:`check_document` has checked every value's
    type, so this only shapes them: tables become their models, lists tuples, numbers floats."""
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key in TABLE_MODELS:
            values["validate_" if key == "validate" else key] = _table(TABLE_MODELS[key], TABLES[key], value)
        elif key == "checks":
            values[key] = tuple(_table(CheckSpec, CHECK, item) for item in value)
        else:
            values[key] = value
    return Profile(**values)


def _table(model: type[Any], specs: dict[str, Spec], table: dict[str, Any]) -> Any:
    values = {}
    for key, value in table.items():
        spec = specs.get(key)
        if spec is not None and spec.type == "number":
            value = float(value)
        elif isinstance(value, list):
            value = tuple(value)
        values[key] = value
    return model(**values)


def _origins(merged: Merged, layers: list[_Layer]) -> dict[str, Origin]:
    """Which file set each key (an appended list: each entry, ``torch.packages[0]``), for messages.

    A file is named by its own ``name`` (the profile a user extends), else by its file."""

    def origin(index: int) -> Origin:
        layer = layers[index]
        name = layer.doc.get("name")
        file = layer.ident.removesuffix(".toml") if layer.place.builtin else layer.ident
        return Origin(
            profile=name if isinstance(name, str) else file,
            file=file,
            inherited=index != len(layers) - 1,
        )

    found = {key: origin(index) for key, index in merged.owner.items()}
    for key, owners in merged.item_owner.items():
        found |= {f"{key}[{i}]": origin(index) for i, index in enumerate(owners)}
    return dict(sorted(found.items()))


_Ref = tuple[_Layer, str, int]  # declaring layer, path as written, index in that layer's list


def _rebase_requirements(layers: list[_Layer], builtin: bool) -> dict[str, _Ref]:
    """Rewrite each layer's ``python.requirements`` relative to the profile's folder, before merging.

    Two files that name ``reqs.txt`` from different folders are different files (both kept); the same
    file named by a parent and a child is one (deduplicated).  Returns rebased path -> (layer, as written).
    """
    refs: dict[str, _Ref] = {}
    for layer in layers:
        python = layer.doc.get("python", {})
        if "requirements" not in python:
            continue
        rebased = []
        for index, rel in enumerate(python["requirements"]):
            label = layer.place.child_label(rel)
            label = label.removeprefix("builtin:") if builtin else label
            refs.setdefault(label, (layer, rel, index))
            rebased.append(label)
        python["requirements"] = rebased
    return refs


def _requirement_lines(
    merged: Merged, refs: dict[str, _Ref], load: _Load, root: _Layer
) -> tuple[RequirementLine, ...]:
    python = merged.data.get("python", {})
    packages = tuple(python.get("packages", ()))
    lines = list(requirements.parse_packages(packages, file=root.place.display, issues=load.issues))
    for label in python.get("requirements", ()):
        layer, rel, index = refs[label]
        key = f"python.requirements[{index}]"
        try:
            target = layer.place.child(rel)
        except PlaceError as exc:
            load.issues.append(Issue(layer.place.display, key, str(exc)))
            continue
        lines += requirements.parse_file(target, key=key, issues=load.issues, on_file=load.record)
    return tuple(lines)


def _app_source(merged: Merged, layers: list[_Layer], load: _Load) -> str | None:
    """Check ``app.source``; an inherited one is rebased onto the profile's folder when it lies inside."""
    source = merged.data.get("app", {}).get("source")
    if source is None:
        return None
    layer = layers[merged.owner["app.source"]]
    root = layers[-1]
    try:
        layer.place.child(source, must_be_dir=True)
    except PlaceError as exc:
        load.issues.append(Issue(layer.place.display, "app.source", str(exc)))
        return None
    absolute = (layer.place.path.parent / source).resolve()
    try:  # refuse here what render would refuse: links out of the folder, credential files
        collect_app(absolute, f"{layer.place.display}: app.source", read=False)
    except BundleError as exc:
        load.issues.append(Issue(layer.place.display, "app.source", str(exc).split(": app.source: ", 1)[-1]))
        return None
    if layer is root:
        return str(source)
    folder = root.place.path.parent.resolve()
    if layer.place.boundary == root.place.boundary and absolute.is_relative_to(folder):
        return absolute.relative_to(folder).as_posix() or "."
    message = (
        f"inherited from {layer.ident}, whose folder is not this profile's; paths resolve against the file "
        'that declares them, so declare [app] source in this profile ("." for its own folder)'
    )
    load.issues.append(Issue(root.place.display, "app.source", message))
    return None
