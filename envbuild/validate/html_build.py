"""Building HTML safely: every string escaped unless it is markup built here.

:func:`el` makes an element: each child and attribute value goes through :func:`html.escape`, except a
:class:`Markup` (what :func:`el` returns); so text from a machine (a hostname, a check's output, a
package name) can only ever be text.  Also the generic views of report.json's values used by
:mod:`envbuild.validate.html_report`: a record list as a table, a dict as rows.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from typing import Any


class Markup(str):
    """Markup this module built (every text in it escaped); :func:`el` keeps it as it is."""


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


Child = object  # str (escaped), Markup (kept), None (dropped), or an iterable of children


def _children(children: Iterable[Child]) -> Iterable[str]:
    for child in children:
        if child is None:
            continue
        if isinstance(child, Markup):
            yield child
        elif isinstance(child, (list, tuple)) or (
            not isinstance(child, (str, bytes)) and isinstance(child, Iterable)
        ):
            yield from _children(child)
        else:
            yield esc(child)


def el(tag: str, *children: Child, **attrs: object) -> Markup:
    """``<tag attrs>children</tag>``: attribute names end in ``_`` where Python needs it (``class_``),
    ``_`` inside a name is ``-``; a value of None or False leaves the attribute out."""
    parts = [tag]
    for key, value in attrs.items():
        if value is None or value is False:
            continue
        name = key.rstrip("_").replace("_", "-")
        parts.append(name if value is True else f'{name}="{esc(value)}"')
    return Markup(f"<{' '.join(parts)}>{''.join(_children(children))}</{tag}>")


def as_dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def stage_facts(data: Mapping[str, Any], name: str) -> dict[str, Any]:
    for s in data.get("stages") or []:
        if isinstance(s, dict) and s.get("stage") == name:
            facts = s.get("facts")
            return facts if isinstance(facts, dict) else {}
    return {}


def is_scalar(value: object) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def text_of(value: object) -> str:
    if isinstance(value, list) and all(is_scalar(v) for v in value):
        return " ".join(str(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return "" if value is None else str(value)


def rows(pairs: Iterable[tuple[str, object]]) -> Markup:
    return Markup(
        "".join(el("tr", el("th", k), el("td", text_of(v))) for k, v in pairs if v not in (None, "", []))
    )


def records_table(records: list[dict[str, Any]]) -> Markup:
    """A table of records (each a dict), one column per key any of them has, in first-seen order."""
    keys: list[str] = []
    for r in records:
        keys += [k for k in r if k not in keys]
    return el(
        "table",
        el("tr", [el("th", k) for k in keys]),
        [el("tr", [el("td", value_view(r.get(k))) for k in keys]) for r in records],
    )


def value_view(value: object) -> Markup | str:
    """A value shown generically: scalars as text, a list of records as a table, a dict as rows."""
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return records_table(value)
    if isinstance(value, dict):
        return el("table", [el("tr", el("th", k), el("td", value_view(v))) for k, v in value.items()])
    if isinstance(value, list) and not all(is_scalar(v) for v in value):
        return el("ul", [el("li", value_view(v)) for v in value])
    return text_of(value)
