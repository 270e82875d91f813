"""Data across envbuild's boundary: validated on the way in (pydantic), written as JSON on the way out.

envbuild's models (:mod:`envbuild.models`, the catalog's rows, the validator's report) are standard-library
dataclasses, frozen and keyword-only unless a class says otherwise.  Building one from trusted values
is a constructor call, and the catalog cache reads them back as plain pickles: no validation library
is imported for either.

Data from outside (a catalog file on a cache miss, a lock, a refresh overlay, a report, a bundle's
``envbuild.inputs.json``) enters through :func:`parse` / :func:`parse_json`: a pydantic ``TypeAdapter``
over the model's dataclass (pydantic is imported then, not before) checks types, literals and nested
models, accepts a list for a tuple, refuses unknown keys, and runs each model's ``__post_init__`` (the
checks a type cannot state: patterns, ranges, cross-field rules, raising ``ValueError("key: problem")``).
Any failure is :class:`InvalidData`, with pydantic's error list.

A model read this way declares ``__pydantic_config__ = INPUT``.  pydantic validates a dataclass that
has no config of its own (every model nested in it) with the config of the one that holds it, so
``INPUT`` applies all the way down: unknown keys refused, and an instance given in place of a nested
model's data checked again, as its fields.

Data leaves through :func:`to_data` / :func:`to_json`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from pydantic import ConfigDict, TypeAdapter

T = TypeVar("T")

INPUT: ConfigDict = {"extra": "forbid", "revalidate_instances": "always"}
"""The pydantic config of a model read by :func:`parse` (``__pydantic_config__ = INPUT``)."""


class InvalidData(ValueError):
    """:func:`parse` refused the data; :attr:`errors` is pydantic's list (``loc``, ``msg``, ...)."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        self.errors = errors
        super().__init__(first_error(errors))


def first_error(errors: list[dict[str, Any]]) -> str:
    """``key.path: message`` for the first error."""
    first = errors[0]
    key = ".".join(str(p) for p in first["loc"])
    return f"{key or '(top level)'}: {error_message(first)}"


def error_message(error: dict[str, Any]) -> str:
    """pydantic's message, without the ``Value error, `` it puts before a ``ValueError`` of ours, and
    worded for data where pydantic words it for a dataclass's constructor call."""
    kind, message = error.get("type"), str(error["msg"])
    if kind == "unexpected_keyword_argument":  # an unknown key
        return "Extra inputs are not permitted"
    if kind == "dataclass_type" and "instance of" in message:  # not a table/object where a model is
        return "Input should be a valid dictionary"
    return message.removeprefix("Value error, ")


_ADAPTERS: dict[type[Any], TypeAdapter[Any]] = {}


def _adapter(cls: type[T]) -> TypeAdapter[T]:
    adapter = _ADAPTERS.get(cls)
    if adapter is None:
        if getattr(cls, "__pydantic_config__", None) is not INPUT:
            raise TypeError(f"{cls.__qualname__} read from outside must declare __pydantic_config__ = INPUT")
        from pydantic import TypeAdapter

        adapter = _ADAPTERS[cls] = TypeAdapter(cls)
    return adapter


def parse(cls: type[T], data: Any) -> T:
    """``data`` (JSON/TOML-shaped) validated into ``cls``; raise :class:`InvalidData`."""
    from pydantic import ValidationError

    try:
        obj: T = _adapter(cls).validate_python(data)
    except ValidationError as exc:
        raise InvalidData(exc.errors(include_url=False)) from None  # type: ignore[arg-type]
    return obj


def parse_json(cls: type[T], text: str | bytes) -> T:
    """A JSON document validated into ``cls``; raise :class:`InvalidData` (bad JSON included)."""
    from pydantic import ValidationError

    try:
        obj: T = _adapter(cls).validate_json(text)
    except ValidationError as exc:
        raise InvalidData(exc.errors(include_url=False)) from None  # type: ignore[arg-type]
    return obj


_FIELDS: dict[type[Any], tuple[str, ...] | None] = {}


def _field_names(cls: type[Any]) -> tuple[str, ...] | None:
    """The field names of a dataclass, in declared order (a base's first); None for another class."""
    try:
        return _FIELDS[cls]
    except KeyError:
        names = tuple(f.name for f in dataclasses.fields(cls)) if dataclasses.is_dataclass(cls) else None
        _FIELDS[cls] = names
        return names


def to_data(obj: Any, *, exclude: Iterable[str] = ()) -> Any:
    """The JSON form of a model (nested models, tuples, dicts and datetimes), fields in declared order.

    ``exclude`` names top-level fields to leave out.  Dict keys stay as they are: ``json.dumps`` writes
    int keys as strings, as the JSON form of a ``dict[int, ...]`` field is."""
    names = _field_names(type(obj))
    if names is not None:
        skip = set(exclude)
        return {name: to_data(getattr(obj, name)) for name in names if name not in skip}
    if isinstance(obj, (list, tuple)):
        return [to_data(item) for item in obj]
    if isinstance(obj, dict):
        return {key: to_data(value) for key, value in obj.items()}
    if hasattr(obj, "isoformat"):  # a datetime: ISO 8601, UTC as "Z"
        text = obj.isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text
    return obj


def to_json(obj: Any, *, indent: int | None = None) -> str:
    """:func:`to_data` as JSON text: UTF-8 as is, compact unless ``indent`` is given."""
    import json  # `check` prints no JSON unless asked: its start does not pay for the module

    separators = (",", ":") if indent is None else (",", ": ")
    return json.dumps(to_data(obj), indent=indent, separators=separators, ensure_ascii=False)
