"""Checking one profile file against its keys (:mod:`envbuild.profile.keys`).

:func:`check_document` checks one parsed TOML file on its own (unknown keys with a did-you-mean, wrong
types, bad enums with the valid choices, every string through :mod:`envbuild.profile.fields`) and
returns a *clean* copy holding only the values that passed, so that merging never sees bad data and
every problem is reported once, against the file that holds it.
"""

from __future__ import annotations

import math
from typing import Any

from envbuild.errors import Issue, choices
from envbuild.profile import fields as f
from envbuild.profile.keys import CHECK, MAX_LIST, TABLES, TOP, Spec, json_key_problem

__all__ = ["CHECK", "TABLES", "TOP", "Spec", "allowed_env_names", "check_document"]
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
            seen = [_canonical(item) if spec.canonical else item for item in value]
            for i, item in enumerate(value):
                problem = spec.check(item) if spec.check else None
                if problem is None and spec.unique and seen[i] in seen[:i]:
                    problem = f"{item!r} is listed twice (also at [{seen.index(seen[i])}])"
                if problem:
                    self.add(f"{key}[{i}]", problem)
                    ok = False
            return ok, seen
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
            problem = json_key_problem(k)
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


def _canonical(name: str) -> str:
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(name))


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
