"""Random, type-confused profiles: the loader answers with a ProfileError (or loads), never crashes."""

from __future__ import annotations

import datetime
import json
import random
from pathlib import Path
from typing import Any

import pytest

from envbuild.errors import ProfileError
from envbuild.profile import load_profile
from envbuild.profile.schema import CHECK, TABLES, TOP

STRINGS = [
    "",
    "x",
    "../x",
    "/etc/passwd",
    "~",
    "a\nb",
    "a\x00b",
    "https://[::1/x",
    "foo @ https://[::1/x.whl",
    "x @ git+ssh://git@host/r",
    "-r x",
    "${X}",
    "ü",
    "a" * 600,
    "numpy==1",
    "h100",
    "3.11",
    "12.8",
    "CUDA",
    "git",
    "https://u:p@h/x",
    "https://h/foo-1.0.tar.gz",
    "https://h/foo-bad.whl",
    ".",
    "app",
    "reqs.txt",
    # from the adversarial review: invisible Unicode, tabs, huge numbers in text, pip file syntax
    "safe \u202e txt",
    "a\u200bb",
    "a\u2028b",
    "a\tb",
    "9" * 5000,
    "numpy; os_name == 'a -r /etc/passwd'",
    "x @ https://h.example/x-1.0.tar.gz#\\",
    "train-",
    "C:\\temp",
    "a/./../../b",
    "{{ x }}",
    "https://evil.example/p.toml",
]


def _value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if roll < 0.35:
        return rng.choice(STRINGS)
    if roll < 0.45:
        return rng.choice([0, -1, 1, 10**18, 10**40, True, 1.5, -0.0, float("nan"), float("inf")])
    if roll < 0.5:
        return datetime.date(2020, 1, 1)
    if roll < 0.75 and depth < 2:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if depth < 2:
        return {
            rng.choice([*STRINGS, "name", "run"]) or "k": _value(rng, depth + 1)
            for _ in range(rng.randint(0, 3))
        }
    return "s"


def _document(rng: random.Random) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    for key in rng.sample([*TOP, *TABLES, "env", "checks", "junk"], rng.randint(1, 8)):
        if key in TABLES and rng.random() < 0.8:
            keys = rng.sample(list(TABLES[key]), rng.randint(1, len(TABLES[key])))
            doc[key] = {k: _value(rng) for k in keys}
        elif key == "checks" and rng.random() < 0.8:
            doc[key] = [
                {k: _value(rng) for k in rng.sample(list(CHECK), rng.randint(1, len(CHECK)))} for _ in "ab"
            ]
        else:
            doc[key] = _value(rng)
    return doc


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if value != value else ("inf" if value == float("inf") else repr(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + "}"


@pytest.mark.parametrize("seed", range(4))
def test_random_profiles_never_crash(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    (tmp_path / "app").mkdir()
    (tmp_path / "reqs.txt").write_text("numpy==2.2.6\n-e .\nfoo @ https://[::1/x.whl\n")
    outcomes = {"loaded": 0, "refused": 0}
    for _ in range(150):
        doc = _document(rng)
        (tmp_path / "p.toml").write_text("".join(f"{json.dumps(k)} = {_toml(v)}\n" for k, v in doc.items()))
        try:
            load_profile(str(tmp_path / "p.toml"))
            outcomes["loaded"] += 1
        except ProfileError as exc:
            assert exc.issues and all(
                issue.file.endswith("p.toml") or "reqs.txt" in issue.file for issue in exc.issues
            )
            outcomes["refused"] += 1
    assert outcomes["refused"] > 0
