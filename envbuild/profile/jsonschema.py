"""The profile's JSON Schema, derived from :mod:`envbuild.profile.schema` (the one definition of its
keys), for TOML editors: taplo / Even Better TOML read ``#:schema ./envbuild-profile.schema.json`` at the
top of a profile and then complete keys, list the choices and flag wrong types as the file is typed.

``envbuild schema`` prints it; ``profiles/envbuild-profile.schema.json`` is the same, regenerated with
``envbuild schema --out profiles/envbuild-profile.schema.json`` (a test keeps it current).  The schema
is a first line of help: envbuild's own checks (names, versions, requirement lines, secrets) still
decide.
"""

from __future__ import annotations

import json
from typing import Any

from envbuild.profile.schema import CHECK, TABLES, TOP, Spec

SCHEMA_FILE = "envbuild-profile.schema.json"
_TYPES = {"str": "string", "int": "integer", "number": "number", "bool": "boolean"}


def _key(spec: Spec) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if spec.doc:
        out["description"] = spec.doc
    if spec.type == "list":
        item: dict[str, Any] = {"type": "string"}
        if spec.choices:
            item["enum"] = list(spec.choices)
        out.update({"type": "array", "items": item})
        if spec.unique:
            out["uniqueItems"] = True
        if spec.append:
            out["description"] = (spec.doc + " " if spec.doc else "") + "Appended to the parent's (extends)."
        return out
    if spec.type == "jsonmap":
        out.update({"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}})
        return out
    out["type"] = _TYPES[spec.type]
    if spec.choices:
        out["enum"] = list(spec.choices)
    if spec.bounds is not None:
        out["minimum"], out["maximum"] = spec.bounds
    return out


def _object(specs: dict[str, Spec], **extra: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: _key(spec) for name, spec in specs.items()},
        "additionalProperties": False,
        **extra,
    }


def profile_schema() -> dict[str, Any]:
    properties: dict[str, Any] = {name: _key(spec) for name, spec in TOP.items()}
    properties.update({name: _object(specs) for name, specs in TABLES.items()})
    properties["env"] = {
        "description": "Environment variables of the image (no secrets: pass those at run time).",
        "type": "object",
        "propertyNames": {"pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
        "properties": {
            "allow_names": {
                "description": (
                    "Names of this table that look like secrets but are not (you vouch for them); "
                    "a value that looks like a token is refused all the same."
                ),
                "type": "array",
                "items": {"type": "string"},
                "uniqueItems": True,
            }
        },
        "additionalProperties": {"type": "string"},
    }
    properties["checks"] = {
        "description": "Your own checks, run by `envbuild validate` ([[checks]]).",
        "type": "array",
        "items": _object(CHECK, required=["name", "run"]),
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "envbuild profile",
        "description": "A profile for `envbuild check`/`render`: what to build for which card.",
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }


def schema_text() -> str:
    return json.dumps(profile_schema(), indent=2) + "\n"
