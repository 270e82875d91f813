"""Typed records, and the two ways across their boundary: data in (validated), data out (JSON).

Every typed model of envbuild (:mod:`envbuild.models`, the catalog's rows, the validator's results,
the planner's and renderer's own records) derives from :class:`Record`: declared like a dataclass
(annotated fields, defaults, :func:`field` for a default factory), frozen and keyword-only unless the
class says otherwise, compared and hashed by value, pickled as plain objects.  Type checkers treat it
as a dataclass (PEP 681, ``dataclass_transform``).  It is not ``@dataclasses.dataclass`` because a
dataclass generates and compiles six methods per class when its module is imported: about 0.8 ms a
class on a small machine, 60 ms for the ~75 classes a cold ``envbuild render`` loads, where
:class:`Record` shares one set of methods and only records its fields when a class is created.

Building a model from trusted values is a constructor call, and reading one back from the catalog
cache is a plain unpickle: a cold ``envbuild check`` imports no validation library.  Data from outside
(a catalog file on a cache miss, a lock file, a refresh overlay, a report) goes through :func:`parse`,
which validates it against the annotations with pydantic (imported then, not before): types,
literals, nested models, unknown keys refused; each model's ``__post_init__`` adds the checks a type
cannot state (patterns, ranges, cross-field rules) and raises ``ValueError`` naming the key.  Any
failure is :class:`InvalidData`, with pydantic's error list.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
elif sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # pragma: no cover - Python 3.10: the marker only matters to type checkers

    def dataclass_transform(**_: Any) -> Callable[[Any], Any]:
        return lambda cls: cls


T = TypeVar("T")
_MISSING: Any = object()


class _Field:
    __slots__ = ("default", "default_factory")

    def __init__(self, default: Any, default_factory: Callable[[], Any] | None) -> None:
        self.default = default
        self.default_factory = default_factory


def field(*, default: Any = _MISSING, default_factory: Callable[[], Any] | None = None) -> Any:
    """A field's default (``default_factory=dict`` for a fresh dict per instance)."""
    return _Field(default, default_factory)


class FrozenInstanceError(AttributeError):
    """A field of a frozen record was assigned or deleted."""


def _is_classvar(annotation: Any) -> bool:
    if isinstance(annotation, str):
        return annotation.startswith(("ClassVar", "typing.ClassVar"))
    return annotation is ClassVar or getattr(annotation, "__origin__", None) is ClassVar


@dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(field,))
class Record:
    """Base of the typed records: subclasses declare annotated fields, with defaults or not.

    Record and keyword-only unless the class says otherwise: ``class Context(Record, frozen=False)``
    (assignable, unhashable), ``kw_only=False`` (positional arguments in field order), ``eq=False``
    (compared and hashed by identity)."""

    _field_names: ClassVar[tuple[str, ...]] = ()
    _defaults: ClassVar[dict[str, Any]] = {}
    _factories: ClassVar[dict[str, Callable[[], Any]]] = {}
    _kw_only: ClassVar[bool] = True

    def __init_subclass__(
        cls, *, frozen: bool = True, kw_only: bool = True, eq: bool = True, **kwargs: Any
    ) -> None:
        super().__init_subclass__(**kwargs)
        names = list(cls._field_names)
        defaults = dict(cls._defaults)
        factories = dict(cls._factories)
        own = cls.__dict__.get("__annotations__", {})  # noqa: RUF063 - inspect is a cost this module avoids
        for name, annotation in own.items():
            if _is_classvar(annotation):
                continue
            if name not in names:
                names.append(name)
            defaults.pop(name, None)
            factories.pop(name, None)
            value = cls.__dict__.get(name, _MISSING)
            if isinstance(value, _Field):
                if value.default_factory is not None:
                    factories[name] = value.default_factory
                elif value.default is not _MISSING:
                    defaults[name] = value.default
                type.__delattr__(cls, name)
            elif value is not _MISSING:
                defaults[name] = value
        cls._field_names = tuple(names)
        cls._defaults = defaults
        cls._factories = factories
        cls._kw_only = kw_only
        if not frozen:
            cls.__setattr__ = object.__setattr__  # type: ignore[method-assign,assignment]
            cls.__delattr__ = object.__delattr__  # type: ignore[method-assign]
            cls.__hash__ = None  # type: ignore[assignment]  # mutable and compared by value: unhashable
        if not eq:
            cls.__eq__ = object.__eq__  # type: ignore[method-assign]
            cls.__hash__ = object.__hash__  # type: ignore[method-assign]

    def __init__(self, *args: Any, **values: Any) -> None:
        cls = type(self)
        if args:
            if cls._kw_only or len(args) > len(cls._field_names):
                raise TypeError(f"{cls.__qualname__}() takes keyword arguments only")
            for name, value in zip(cls._field_names, args, strict=False):
                if name in values:
                    raise TypeError(f"{cls.__qualname__}() got multiple values for argument {name!r}")
                values[name] = value
        state = self.__dict__
        for name in cls._field_names:
            if name in values:
                state[name] = values.pop(name)
            elif name in cls._defaults:
                state[name] = cls._defaults[name]
            elif name in cls._factories:
                state[name] = cls._factories[name]()
            else:
                raise TypeError(f"{cls.__qualname__}() missing required argument: {name!r}")
        if values:
            raise TypeError(f"{cls.__qualname__}() got an unexpected keyword argument {next(iter(values))!r}")
        self.__post_init__()

    def __post_init__(self) -> None:
        """Checks a type cannot state; raise ``ValueError("key: problem")``."""

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r} of a frozen {type(self).__qualname__}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r} of a frozen {type(self).__qualname__}")

    def _values(self) -> tuple[Any, ...]:
        state = self.__dict__
        return tuple(state[name] for name in self._field_names)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        state = self.__dict__
        inner = ", ".join(f"{name}={state[name]!r}" for name in self._field_names)
        return f"{type(self).__qualname__}({inner})"

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """How :func:`parse` validates the model: a dict of its fields (unknown keys refused, each value
        validated against its annotation), then the constructor (``__post_init__`` included)."""
        import typing

        from pydantic_core import core_schema

        hints = typing.get_type_hints(cls)
        required = set(cls._field_names) - set(cls._defaults) - set(cls._factories)
        fields = {
            name: core_schema.typed_dict_field(
                handler.generate_schema(hints[name]), required=name in required
            )
            for name in cls._field_names
        }
        from_dict = core_schema.no_info_after_validator_function(
            lambda data: cls(**data), core_schema.typed_dict_schema(fields, extra_behavior="forbid")
        )

        def as_dict(value: Any) -> Any:  # an instance is checked again, as its fields
            if isinstance(value, cls):
                return {name: value.__dict__[name] for name in cls._field_names}
            return value

        return core_schema.no_info_before_validator_function(as_dict, from_dict)


def fields(model: type[Record] | Record) -> tuple[str, ...]:
    """The field names of a model class or instance, in declared order (a base's first)."""
    return model._field_names


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
    """pydantic's message, without the ``Value error, `` it puts before a ``ValueError`` of ours."""
    return str(error["msg"]).removeprefix("Value error, ")


_ADAPTERS: dict[Any, Any] = {}


def _adapter(cls: Any) -> Any:
    adapter = _ADAPTERS.get(cls)
    if adapter is None:
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


def to_data(obj: Any, *, exclude: Iterable[str] = ()) -> Any:
    """The JSON form of a model (nested models, tuples, dicts and datetimes), fields in declared order.

    ``exclude`` names top-level fields to leave out.  Dict keys stay as they are: ``json.dumps`` writes
    int keys as strings, as the JSON form of a ``dict[int, ...]`` field is."""
    if isinstance(obj, Record):
        skip = set(exclude)
        state = obj.__dict__
        return {name: to_data(state[name]) for name in obj._field_names if name not in skip}
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
    separators = (",", ":") if indent is None else (",", ": ")
    import json  # `check` prints no JSON unless asked: its start does not pay for the module

    return json.dumps(to_data(obj), indent=indent, separators=separators, ensure_ascii=False)


def replace(obj: T, **changes: Any) -> T:
    """A copy of a frozen model with ``changes`` (field name -> value), checked as a new one is."""
    if not isinstance(obj, Record):
        raise TypeError(f"replace() takes a model, not {type(obj).__name__}")
    state = obj.__dict__
    return type(obj)(**{**{name: state[name] for name in obj._field_names}, **changes})
