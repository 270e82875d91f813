"""The text of a pip requirements file: how pip decodes it and which logical lines it reads.

Follows ``pip._internal.req.req_file``: lines ending in ``\\`` are joined (a comment line never
continues), ``#`` starts a comment at the start of a line or after whitespace (so ``...whl#sha256=...``
survives), blank lines are skipped.  Decoding follows pip's ``auto_decode`` (a BOM, else a coding line,
else UTF-8).  Everything runs in linear time: a hostile multi-megabyte line is handled quickly.
"""

from __future__ import annotations

import re

from envbuild.profile.pep508 import LineError

_COMMENT_RE = re.compile(r"(^|\s+)#.*$")
_BOMS = (
    (b"\xef\xbb\xbf", "utf-8"),
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)
_CODING_RE = re.compile(rb"coding[:=]\s*([-\w.]+)")


def strip_comment(line: str) -> str:
    """``_COMMENT_RE.sub("", line)`` (pip's ``(^|\\s+)#.*$``) in linear time.

    The regex retries ``\\s+`` from every blank of a long run: quadratic, so a hostile file with a
    megabyte of spaces would hang.  The first ``#`` at the start or after a blank begins the comment,
    together with the blanks before it.
    """
    start = 0
    while True:
        i = line.find("#", start)
        if i < 0:
            return line
        if i == 0 or line[i - 1].isspace():
            cut = i
            while cut > 0 and line[cut - 1].isspace():
                cut -= 1
            return line[:cut]
        start = i + 1


def logical_lines(text: str) -> list[tuple[int, str]]:
    """pip's join_lines + ignore_comments: (first physical line number, logical line)."""
    out: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(), start=1):
        is_comment = _COMMENT_RE.match(line) is not None
        if not line.endswith("\\") or is_comment:
            if is_comment:
                line = " " + line
            if pending:
                pending.append(line)
                out.append((start, "".join(pending)))
                pending = []
            else:
                out.append((number, line))
        else:
            if not pending:
                start = number
            pending.append(line.rstrip("\\"))
    if pending:
        out.append((start, "".join(pending)))
    cleaned = [(n, strip_comment(line).strip()) for n, line in out]
    return [(n, line) for n, line in cleaned if line]


def decode(data: bytes) -> str:
    """pip's ``auto_decode``: a BOM (UTF-8/16/32), else a ``# -*- coding: X -*-`` line, else UTF-8.

    pip falls back to the locale's encoding; envbuild does not (it would read differently on
    another machine) and says so.
    """
    for bom, codec in _BOMS:
        if data.startswith(bom):
            try:
                return data[len(bom) :].decode(codec)
            except UnicodeDecodeError as exc:
                raise LineError(
                    f"not valid {codec} text after its BOM: {exc.reason} at byte {exc.start}"
                ) from None
    codec = "UTF-8"
    for line in data.split(b"\n")[:2]:
        found = _CODING_RE.search(line) if line.lstrip().startswith(b"#") else None
        if found:
            codec = found.group(1).decode("ascii")
            break
    try:
        return data.decode(codec)
    except LookupError:
        raise LineError(f"unknown encoding {codec!r} in its coding line") from None
    except UnicodeDecodeError as exc:
        raise LineError(
            f"not {codec} text: {exc.reason} at byte {exc.start} (save it as UTF-8, "
            "or name the encoding in a '# -*- coding: NAME -*-' first line)"
        ) from None
