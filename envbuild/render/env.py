"""The one Jinja environment every envbuild template is rendered with.

``StrictUndefined`` turns a misspelt variable into an error instead of an empty string; autoescape
is off because the outputs are Dockerfiles and Markdown, and every value is quoted in Python (see
:mod:`envbuild.render.quote`) before it reaches a template.  Templates hold loops and conditions only.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import jinja2

from envbuild.resources import templates_dir


@cache
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        newline_sequence="\n",
    )


def render_template(template: str, **context: Any) -> str:
    """Render ``templates/<name>`` and normalise it: LF endings, no trailing blanks, one final newline."""
    text = environment().get_template(template).render(**context)
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    collapsed: list[str] = []
    for line in lines:
        if not line and collapsed and not collapsed[-1]:
            continue  # never two blank lines in a row, whatever the conditions left behind
        collapsed.append(line)
    return "\n".join(collapsed) + "\n"
