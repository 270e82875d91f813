"""envbuild.boundary: the models are plain dataclasses, data from outside enters only validated (unknown
keys refused at every depth, each model's own checks run and named by key path), and leaves as JSON."""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Literal

import pytest
from validate_support import gpu_lock

from envbuild.boundary import INPUT, InvalidData, parse, parse_json, to_data, to_json
from envbuild.catalog.loader import CardsFile
from envbuild.models import Card, Lock, Profile


@dataclass(frozen=True, kw_only=True)
class Inner:
    name: str
    size: float = 1.0

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("name: must not be empty")


@dataclass(frozen=True, kw_only=True)
class Outer:
    __pydantic_config__ = INPUT

    kind: Literal["a", "b"]
    inners: tuple[Inner, ...] = ()
    tags: dict[str, str] = field(default_factory=dict)
    when: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class Unmarked:
    name: str


def test_parse_validates_types_literals_unknown_keys_and_post_init() -> None:
    good = parse(Outer, {"kind": "a", "inners": [{"name": "x", "size": 2}]})
    assert good == Outer(kind="a", inners=(Inner(name="x", size=2.0),))
    assert isinstance(good.inners, tuple) and isinstance(good.inners[0].size, float)  # a list for a tuple
    cases = [
        ({"kind": "c"}, ("kind",), "kind: Input should be 'a' or 'b'"),
        ({"kind": "a", "colour": 1}, ("colour",), "colour: Extra inputs are not permitted"),
        (
            {"kind": "a", "inners": [{"name": "x", "colour": 1}]},
            ("inners", 0, "colour"),
            "inners.0.colour: Extra",
        ),
        ({"kind": "a", "inners": [{"name": ""}]}, ("inners", 0), "inners.0: name: must not be empty"),
        ({"kind": "a", "inners": [5]}, ("inners", 0), "inners.0: Input should be a valid dictionary"),
        ({"inners": []}, ("kind",), "kind: Field required"),
    ]
    for data, loc, message in cases:
        with pytest.raises(InvalidData) as exc:
            parse(Outer, data)
        assert exc.value.errors[0]["loc"] == loc and str(exc.value).startswith(message), data


def test_an_instance_in_place_of_data_is_checked_again() -> None:
    inner = Inner(name="x")
    assert parse(Outer, {"kind": "b", "inners": [inner]}).inners == (inner,)
    bad = Inner(name="x")
    object.__setattr__(bad, "size", "big")
    with pytest.raises(InvalidData, match=r"^inners\.0\.size: "):
        parse(Outer, {"kind": "b", "inners": [bad]})


def test_a_model_read_from_outside_says_so() -> None:
    with pytest.raises(TypeError, match="__pydantic_config__ = INPUT"):
        parse(Unmarked, {"name": "x"})


def test_json_out_and_back() -> None:
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    value = Outer(kind="b", inners=(Inner(name="é"),), tags={"k": "v"}, when=when)
    text = to_json(value, indent=2)
    assert '"name": "é"' in text and '"when": "2026-01-02T03:04:05Z"' in text  # UTF-8 as is, UTC as Z
    assert list(to_data(value)) == ["kind", "inners", "tags", "when"]  # declared order
    assert to_data(value)["inners"] == [{"name": "é", "size": 1.0}]
    assert "kind" not in to_data(value, exclude={"kind"})
    assert parse_json(Outer, text) == value
    assert to_json(Inner(name="x")) == '{"name":"x","size":1.0}'  # compact
    with pytest.raises(InvalidData, match=r"^\(top level\): Invalid JSON"):
        parse_json(Outer, "{bad")


def test_the_lock_refuses_an_unknown_key_nested_in_it() -> None:
    data = to_data(gpu_lock("cuda", ["h100"]))
    assert parse_json(Lock, json.dumps(data)) == gpu_lock("cuda", ["h100"])
    data["targets"][0]["colour"] = "red"
    with pytest.raises(InvalidData, match=r"^targets\.0\.colour: Extra inputs are not permitted"):
        parse_json(Lock, json.dumps(data))


def test_a_catalog_row_refuses_an_unknown_key_and_names_a_bad_value() -> None:
    card = {
        "tier": "P",
        "source": "test",
        "id": "h100",
        "name": "H100",
        "vendor": "nvidia",
        "arch": "sm_90",
        "memory_gib": 80,
        "cards_per_lot": 1,
    }
    reserve = {"tier": "P", "source": "test", "vendor": "nvidia", "gib": 0.5, "what": "ctx", "cite": "doc"}
    assert parse(CardsFile, {"reserve": [reserve], "card": [card]}).card[0].memory_gib == 80.0
    with pytest.raises(InvalidData, match=r"^card\.0\.colour: Extra inputs"):
        parse(CardsFile, {"reserve": [reserve], "card": [{**card, "colour": 1}]})
    with pytest.raises(InvalidData, match=r"^card\.0: cards_per_lot: must be at least 1"):
        parse(CardsFile, {"reserve": [reserve], "card": [{**card, "cards_per_lot": 0}]})


def test_models_are_frozen_keyword_only_dataclasses_that_pickle() -> None:
    card = Card(
        id="h100", name="H100", vendor="nvidia", arch="sm_90", memory_gib=80.0, cards_per_lot=1, source="s"
    )
    assert pickle.loads(pickle.dumps(card)) == card and hash(card) == hash(replace(card))
    with pytest.raises(AttributeError):
        card.id = "h200"  # type: ignore[misc]
    with pytest.raises(ValueError, match="must not be empty"):
        replace(Inner(name="x"), name="")  # a copy is checked as a new one is
    profile = Profile(name="p", kind="ubuntu", path="builtin:p", sha256="0" * 64)
    assert profile.base.os == "ubuntu24.04" and profile.validate_.probe_ops
