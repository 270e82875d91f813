"""envbuild.typed: records behave as frozen keyword-only dataclasses, cross the pickle boundary as plain
objects, and enter from outside only through validation."""

from __future__ import annotations

import pickle
from typing import Literal

import pytest

from envbuild.models import Card, Profile
from envbuild.typed import (
    FrozenInstanceError,
    InvalidData,
    Record,
    field,
    fields,
    parse,
    parse_json,
    replace,
    to_data,
    to_json,
)


class Inner(Record):
    name: str
    size: float = 1.0

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("name: must not be empty")


class Outer(Record):
    kind: Literal["a", "b"]
    inners: tuple[Inner, ...] = ()
    tags: dict[str, str] = field(default_factory=dict)


class Child(Outer):
    extra: int = 0


class Mutable(Record, frozen=False, kw_only=False):
    items: list[str] = field(default_factory=list)
    count: int = 0


def test_a_record_is_frozen_keyword_only_and_compared_by_value() -> None:
    one = Outer(kind="a", inners=(Inner(name="x"),))
    with pytest.raises(FrozenInstanceError):
        one.kind = "b"  # type: ignore[misc]
    with pytest.raises(TypeError, match="keyword arguments only"):
        Outer("a")  # type: ignore[misc]
    with pytest.raises(TypeError, match="missing required argument: 'kind'"):
        Outer()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        Outer(kind="a", colour="red")  # type: ignore[call-arg]
    assert one == Outer(kind="a", inners=(Inner(name="x"),)) and one != Outer(kind="b")
    assert hash(Inner(name="x")) == hash(Inner(name="x"))
    assert Outer(kind="a").tags is not Outer(kind="a").tags  # a fresh dict per instance


def test_fields_are_inherited_in_order_and_post_init_runs() -> None:
    assert fields(Child) == ("kind", "inners", "tags", "extra")
    assert repr(Inner(name="x")) == "Inner(name='x', size=1.0)"
    with pytest.raises(ValueError, match="name: must not be empty"):
        Inner(name="")


def test_a_class_can_be_mutable_and_positional() -> None:
    m = Mutable(["a"], 2)
    m.count = 3
    assert m == Mutable(["a"], 3)
    with pytest.raises(TypeError):
        hash(m)  # mutable and compared by value: unhashable


def test_pickle_round_trip_needs_no_constructor() -> None:
    card = Card(
        id="h100", name="H100", vendor="nvidia", arch="sm_90", memory_gib=80.0, cards_per_lot=1, source="s"
    )
    assert pickle.loads(pickle.dumps(card)) == card


def test_parse_validates_types_literals_unknown_keys_and_post_init() -> None:
    good = parse(Outer, {"kind": "a", "inners": [{"name": "x", "size": 2}]})
    assert good == Outer(kind="a", inners=(Inner(name="x", size=2.0),))
    assert isinstance(good.inners[0].size, float)
    cases = [
        ({"kind": "c"}, ("kind",), "Input should be 'a' or 'b'"),
        ({"kind": "a", "colour": 1}, ("colour",), "Extra inputs are not permitted"),
        ({"kind": "a", "inners": [{"name": ""}]}, ("inners", 0), "name: must not be empty"),
        ({"inners": []}, ("kind",), "Field required"),
    ]
    for data, loc, message in cases:
        with pytest.raises(InvalidData) as exc:
            parse(Outer, data)
        assert exc.value.errors[0]["loc"] == loc and message in str(exc.value), data


def test_parse_takes_an_instance_and_checks_it_again() -> None:
    inner = Inner(name="x")
    assert parse(Outer, {"kind": "b", "inners": [inner]}).inners == (inner,)


def test_json_out_and_back() -> None:
    value = Child(kind="b", inners=(Inner(name="é"),), tags={"k": "v"}, extra=3)
    text = to_json(value, indent=2)
    assert '"name": "é"' in text  # UTF-8 as it is
    assert to_data(value)["inners"] == [{"name": "é", "size": 1.0}]
    assert parse_json(Child, text) == value
    assert "kind" not in to_data(value, exclude={"kind"})


def test_replace_makes_a_checked_copy() -> None:
    base = Outer(kind="a")
    assert replace(base, kind="b") == Outer(kind="b") and base.kind == "a"
    with pytest.raises(ValueError, match="must not be empty"):
        replace(Inner(name="x"), name="")


def test_the_profile_model_builds_from_keywords() -> None:
    profile = Profile(name="p", kind="ubuntu", path="builtin:p", sha256="0" * 64)
    assert profile.base.os == "ubuntu24.04" and profile.validate_.compile_extensions
