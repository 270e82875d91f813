"""Secret values: well-known token formats, private keys and URLs that carry a credential; redaction.

:func:`value_reason` says what secret a value holds; :func:`redact` keeps the recognisable prefix and
drops the rest (``hf_***``, ``sk-***``, ``AKIA***``, ``https://***@host/...``, ``?token=***``, a PEM
block reduced to its BEGIN line).  A redacted form never contains any character of the value beyond
its public prefix.  :func:`redact_tail` redacts before it cuts a text to its end, and again after.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from envbuild.secrets.formats import tokens
from envbuild.secrets.names import is_secret_name
from envbuild.secrets.urls import redact_url, url_reason, url_spans

MASK = "***"
REDACTED = "[REDACTED]"  # a whole value withheld because its name says it is secret

# PEM private keys of every kind: "RSA", "EC", "DSA", "OPENSSH", "ENCRYPTED", plain PKCS#8 (RFC 7468),
# and OpenPGP armour "PGP PRIVATE KEY BLOCK" (RFC 4880).  A block without its END line runs to the end.
_PEM_BEGIN_RE = re.compile(r"-----BEGIN (?P<label>[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----")
_PEM_BLOCK_RE = re.compile(
    r"-----BEGIN (?P<label>[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----.*?(?:-----END [A-Z0-9 ]*-----|\Z)",
    re.DOTALL,
)
# An END line whose BEGIN was cut away (the tail of a long output): everything before it goes.
_PEM_END_RE = re.compile(r"-----END (?P<label>[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----")
# PuTTY private key files (.ppk): "PuTTY-User-Key-File-2:" / "-3:" then "Private-Lines: N" and N lines
# of base64 (the PuTTY manual, appendix C "PPK file format").
_PPK_MARK = "PuTTY-User-Key-File-"
_PPK_RE = re.compile(r"PuTTY-User-Key-File-[0-9]+:")
_PPK_PRIVATE_RE = re.compile(r"Private-(?:Lines|MAC): *[0-9A-Za-z]*(?:\r?\n[A-Za-z0-9+/=]+(?=\r?\n|\Z))*")


def value_reason(value: str) -> str | None:
    """What secret ``value`` holds (``"a GitHub access token"``), or ``None``."""
    if "PRIVATE KEY" in value and _PEM_BEGIN_RE.search(value):
        return "a private key"
    if _PPK_MARK in value and _PPK_RE.search(value):
        return "a PuTTY private key"
    found = tokens(value)
    if found:
        return found[0][2]
    if "://" in value:
        for start, end in url_spans(value):
            reason = url_reason(value[start:end])
            if reason:
                return reason
    return None


def is_secret_value(value: str) -> bool:
    return value_reason(value) is not None


def _replace(text: str, spans: list[tuple[int, int, str]]) -> str:
    out: list[str] = []
    last = 0
    for start, end, replacement in spans:
        if start < last:
            continue  # inside a span already replaced
        out.append(text[last:start])
        out.append(replacement)
        last = end
    out.append(text[last:])
    return "".join(out)


def redact(text: str, also: Sequence[str] = ()) -> str:
    """``text`` with every secret value replaced by its redacted form.

    ``also``: further literal values to withhold (for example the values of secret-named variables),
    replaced by ``[REDACTED]``; the longest first, so that a value containing another goes whole.
    """
    for value in sorted(also, key=len, reverse=True):
        if value:
            text = text.replace(value, REDACTED)
    if "PRIVATE KEY" in text:
        text = _PEM_BLOCK_RE.sub(lambda m: f"-----BEGIN {m.group('label')}----- {MASK}", text)
        orphan = _PEM_END_RE.search(text)
        if orphan:  # its BEGIN was cut away: what comes before it may be the key's body
            text = f"{MASK} {orphan.group()}{text[orphan.end() :]}"
    if _PPK_MARK in text or "Private-" in text:
        text = _PPK_PRIVATE_RE.sub(lambda m: m.group().split(":", 1)[0] + ": " + MASK, text)
    found = tokens(text)
    if found:
        text = _replace(text, [(s, e, text[s : s + keep] + MASK) for s, e, _, keep in found])
    if "://" in text:
        text = _replace(text, [(s, e, redact_url(text[s:e], MASK)) for s, e in url_spans(text)])
    return text


def redact_tail(text: str, limit: int, also: Sequence[str] = ()) -> str:
    """The last ``limit`` characters of ``text`` as they may be shown: redacted whole first (a token
    whose prefix the cut would remove is still recognised), cut, and redacted again."""
    text = redact(text, also)
    return redact(text[-limit:], also) if len(text) > limit else text


def redact_value(name: str, value: str) -> str:
    """One variable's value as it may be shown: withheld whole when the name says secret, else redacted."""
    return REDACTED if is_secret_name(name) else redact(value)
