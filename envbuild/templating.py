"""The one Jinja environment every envbuild template is rendered with.

``StrictUndefined`` turns a misspelt variable into an error instead of an empty string; autoescape
is off because the bundle's outputs are Dockerfiles and Markdown, and every value is quoted in Python
(see :mod:`envbuild.render.quote`) before it reaches a template.  The report's HTML pages
(templates/report/*.html.j2: :mod:`envbuild.report.html`, :mod:`envbuild.report.fleet`) turn it on for
the whole page with ``{% autoescape true %}``.  Templates hold loops and conditions only.

A module of the base (not of ``render/``), so the report room and the validator that writes report.html
render with it without loading the bundle renderer.

jinja2 is imported on first use, and compiled templates are kept in envbuild's cache folder
(``jinja/<key>/`` under :func:`envbuild.resources.cache_dir`), so a cold ``render`` does not compile
them again.  Jinja reuses a compiled template only while its source's checksum matches; ``<key>``
covers what else the compiled code depends on (jinja2's and Python's versions, this module, which
holds the environment's options).  A cache that cannot be read or written is simply not used.
"""

from __future__ import annotations

import hashlib
import os
import sys
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envbuild.resources import cache_dir, templates_dir

if TYPE_CHECKING:
    import jinja2


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    import jinja2
    from jinja2.bccache import Bucket

    try:
        own = Path(__file__).read_bytes()
        folder = cache_dir() / "jinja"
    except (OSError, RuntimeError):  # RuntimeError: no home folder for the default cache folder
        return None
    key = hashlib.sha256(b"\0".join([jinja2.__version__.encode(), sys.version.encode(), own]))
    directory = folder / key.hexdigest()[:32]

    class TemplateCache(jinja2.FileSystemBytecodeCache):
        """Jinja's file cache, made quiet: a slot that is not this user's alone, cannot be read or is
        corrupt is a miss, and one that cannot be written is skipped."""

        def load_bytecode(self, bucket: Bucket) -> None:
            try:
                with open(self._get_cache_filename(bucket), "rb") as f:
                    st = os.fstat(f.fileno())
                    if hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & 0o022):
                        return
                    bucket.load_bytecode(f)
            except Exception:  # missing, unreadable or corrupt (the unpickler raises anything)
                bucket.reset()

        def dump_bytecode(self, bucket: Bucket) -> None:
            try:
                for path in (folder.parent, folder, directory):
                    path.mkdir(mode=0o700, parents=True, exist_ok=True)
                super().dump_bytecode(bucket)
            except OSError:
                pass

    return TemplateCache(str(directory))


@cache
def environment() -> jinja2.Environment:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        newline_sequence="\n",
        bytecode_cache=_bytecode_cache(),
    )


def render_template(template: str, **context: Any) -> str:
    """Render ``templates/<name>`` and normalise it: LF endings, no trailing blanks, one final newline."""
    text = environment().get_template(template).render(**context)
    # Split at LF only: splitlines would turn a stray U+2028 in a value into a real line break, where
    # the last look at a bundle's files (envbuild.render.quote.check_generated) could not see it.
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    collapsed: list[str] = []
    for line in lines:
        if not line and collapsed and not collapsed[-1]:
            continue  # never two blank lines in a row, whatever the conditions left behind
        collapsed.append(line)
    return "\n".join(collapsed) + "\n"
