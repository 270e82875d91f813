"""One definition of the profile's keys (envbuild/profile/schema.py): the typed model, the merge of
``extends`` and the published JSON Schema all agree with it, and editors can use the schema."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any, get_type_hints

import jsonschema
import pytest
import tomllib

from envbuild.models import CheckSpec, Profile
from envbuild.profile.jsonschema import SCHEMA_FILE, profile_schema, schema_text
from envbuild.profile.loader import TABLE_MODELS
from envbuild.profile.schema import CHECK, TABLES, TOP

REPO = Path(__file__).resolve().parent.parent
PROFILES = sorted((REPO / "profiles").glob("*.toml"))


def test_published_schema_is_current() -> None:
    assert (REPO / "profiles" / SCHEMA_FILE).read_text(encoding="utf-8") == schema_text(), (
        "regenerate with: envbuild schema --out profiles/envbuild-profile.schema.json"
    )


def _names(model: type[Any]) -> set[str]:
    return {f.name for f in fields(model)}


def test_the_typed_model_has_exactly_the_schema_keys() -> None:
    derived = {"python": {"lines"}}  # filled by the loader from packages and requirements, never written
    hints = get_type_hints(Profile)
    for table, specs in TABLES.items():
        model = hints["validate_" if table == "validate" else table]
        assert TABLE_MODELS[table] is model, table  # the loader builds each table as the field's model
        assert _names(model) - derived.get(table, set()) == set(specs), table
    assert set(TOP) <= _names(Profile) and set(CHECK) == _names(CheckSpec)


@pytest.mark.parametrize("path", PROFILES, ids=[p.stem for p in PROFILES])
def test_builtin_profiles_name_the_schema_and_pass_it(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.startswith(f"#:schema ./{SCHEMA_FILE}\n")
    jsonschema.validate(tomllib.loads(text), profile_schema())


def test_the_schema_rejects_what_check_rejects() -> None:
    schema = profile_schema()
    for bad in (
        {"name": "x", "kind": "pytorch", "torch": {"verison": "2.7.1"}},  # unknown key
        {"name": "x", "kind": "pytorch", "accelerator": {"backend": "metal"}},  # not a choice
        {"name": "x", "kind": "pytorch", "resources": {"gpus": 0}},  # out of range
        {"name": "x", "kind": "blender", "blender": {"devices": ["CUDA", "CUDA"]}},  # listed twice
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
