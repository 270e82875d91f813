"""Text envbuild did not write, made safe before it reaches a terminal or Markdown (issue 36, finding 6).

Untrusted text is anything the rented machine, a capture, a peer or a copied report decides: a report's
``first_failure`` and stage errors, ``nvidia-smi``/``amd-smi``/``rocm-smi`` output (a card's name, a
driver string), errors raised by torch or gloo, package names, paths and file names.  A provider who
controls such text must not be able to clear the renter's screen, set the terminal's title, recolour
or hide text (ESC sequences), reorder it (bidi overrides), or inject Markdown or HTML into
``report.md``.

One rule per output, applied where the text enters envbuild's output (never in each caller):

- :func:`terminal`: control characters become visible escapes: C0 (``\\n`` kept where a multi-line
  block is intended), DEL, C1, the bidi controls, the Unicode line separators and lone surrogates (which
  would make ``print`` raise).  ``"\\x1b[2J"`` prints as ``\\x1b[2J``.
- :func:`markdown`: one line of Markdown text: line breaks become spaces, control characters are
  escaped as above, and every character Markdown or HTML would read is backslash-escaped (``|``,
  backticks, ``*``, ``_``, ``[``, ``]``, ``<``, ``>``, ``~``, ``$``, ``\\``, an ``&`` that starts an
  entity), so ``<script>`` stays text and a table keeps its columns.
- :func:`markdown_code`: a code span (a run of backticks longer than any inside it);
  :func:`markdown_block`: a fenced block of several lines.
- rich (the terminal's tables): :func:`envbuild.cli.output.markup` is :func:`terminal` then
  ``rich.markup.escape``, for text put inside markup; or ``rich.text.Text(terminal(...))``.
- HTML: Jinja's autoescape (:mod:`envbuild.report.html`, ``report fleet --html``).

Standard library only: the validator and its probes may use it.
"""

from __future__ import annotations

import re

# Bidi embedding/override/isolate controls and marks (the "Trojan Source" characters), the Arabic letter
# mark, and the Unicode line and paragraph separators.
_BIDI_AND_SEPARATORS = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029"
_CONTROL = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI_AND_SEPARATORS}\ud800-\udfff]")
_CONTROL_BUT_NEWLINE = re.compile(f"[\x00-\x09\x0b-\x1f\x7f-\x9f{_BIDI_AND_SEPARATORS}\ud800-\udfff]")
# What Markdown (CommonMark, GFM tables and strikethrough, GitHub's math) or inline HTML would read.
_MARKDOWN = re.compile(r"([\\`*_\[\]<>|~$]|&(?=#?[A-Za-z0-9]+;))")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_BACKTICKS = re.compile(r"`+")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal(text: object, *, multiline: bool = False) -> str:
    """``text`` (``str()`` of anything else) with every control character as a visible escape;
    ``multiline``: ``\\n`` is kept (a block of several lines is intended)."""
    value = text if isinstance(text, str) else str(text)
    return (_CONTROL_BUT_NEWLINE if multiline else _CONTROL).sub(_visible, value)


def one_line(text: object) -> str:
    """``text`` on one line: each line break a space, then :func:`terminal`."""
    value = text if isinstance(text, str) else str(text)
    return terminal(_LINE_BREAK.sub(" ", value))


def markdown(text: object) -> str:
    """``text`` as one line of Markdown that reads as the text itself (a table cell, a list item)."""
    return _MARKDOWN.sub(r"\\\1", one_line(text))


def markdown_code(text: object, *, in_table: bool = False) -> str:
    """``text`` as a Markdown code span (one line); ``in_table``: its ``|`` escaped, as a GFM table
    cell needs even inside code."""
    value = one_line(text)
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(value)), default=0) + 1)
    pad = " " if value.startswith(("`", " ")) or value.endswith(("`", " ")) else ""
    if in_table:
        value = value.replace("|", "\\|")
    return f"{fence}{pad}{value}{pad}{fence}"


def markdown_fence(text: str) -> str:
    """A fence of backticks longer than any run of backticks in ``text`` (three at least)."""
    return "`" * max(3, max((len(run) for run in _BACKTICKS.findall(text)), default=0) + 1)


def markdown_block(text: object) -> list[str]:
    """``text`` as a fenced code block of several lines (control characters but ``\\n`` escaped)."""
    value = terminal(_LINE_BREAK.sub("\n", text if isinstance(text, str) else str(text)), multiline=True)
    fence = markdown_fence(value)
    return [fence, value, fence]
