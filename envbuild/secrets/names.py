"""Names that say a value is secret: a word list with exceptions.

A name is split into word parts (``_``, ``-``, ``.``, camelCase).  A part that *is* ``KEY``/``PAT``/
``PASS``/``PWD``/``CREDS``/``COOKIE``, that starts or ends with ``SECRET``, ``PASSWORD``, ``PASSWD``,
``PASSPHRASE`` or ``CREDENTIAL``, that ends with ``TOKEN``, ``APIKEY``, ``ACCESSKEY``, ``PRIVATEKEY``,
``SECRETKEY``, ``SSHKEY`` or ``AUTHKEY`` (or is one of the ``*KEY`` words plus ``S``), and ``AUTH``
words other than ``AUTHOR``/``AUTHORITY``, mark a secret.  Exceptions, which are not secret names:

* a plural count of tokens: ``TOKENS`` (``MAX_TOKENS``, ``MAX_NEW_TOKENS``, ``NUM_TOKENS``);
* ``KEY`` in ``KEY_FRAMES``/``KEY_POINTS`` (animation, pose estimation) and ``PUBLIC_KEY``;
* in a variable table (:func:`env_name_reason`): a flag with a boolean value
  (``HF_HUB_DISABLE_IMPLICIT_TOKEN = "1"``), and a name the user vouches for (``[env] allow_names``).
"""

from __future__ import annotations

import re
from collections.abc import Collection

_WHOLE_WORDS = frozenset({"KEY", "KEYS", "PAT", "PATS", "PASS", "PWD", "CREDS", "COOKIE", "COOKIES"})
_EITHER_END_WORDS = ("SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL")  # CLIENTSECRET, SECRETS
_SUFFIX_WORDS = ("TOKEN", "APIKEY", "ACCESSKEY", "PRIVATEKEY", "SECRETKEY", "SSHKEY", "AUTHKEY")
_PLURAL_COUNTS = frozenset({"TOKENS"})  # MAX_TOKENS: a count of tokenizer tokens, not credentials
_NOT_AUTH = frozenset({"AUTHOR", "AUTHORS", "AUTHORITY", "AUTHORITIES"})
_KEY_COMPOUNDS_AFTER = frozenset({"FRAME", "FRAMES", "POINT", "POINTS"})  # KEY_FRAMES, KEY_POINTS
_KEY_COMPOUNDS_BEFORE = frozenset({"PUBLIC"})  # PUBLIC_KEY
# A flag's value: the spellings Python tools read as booleans (distutils' strtobool, pydantic).
BOOLEAN_VALUES = frozenset({"0", "1", "true", "false", "yes", "no", "on", "off", "y", "n", "t", "f"})
_CAMEL_RE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD_SPLIT_RE = re.compile(r"[^A-Za-z0-9]+")


def name_words(name: str) -> list[str]:
    """``hfToken`` -> ``["HF", "TOKEN"]``; ``OPENAI_API_KEY`` -> ``["OPENAI", "API", "KEY"]``."""
    return [w.upper() for part in _WORD_SPLIT_RE.split(name) for w in _CAMEL_RE.split(part) if w]


def _word_reason(words: list[str], index: int) -> str | None:
    word = words[index]
    if word in _PLURAL_COUNTS:
        return None
    if word in ("KEY", "KEYS"):
        after = words[index + 1] if index + 1 < len(words) else ""
        before = words[index - 1] if index else ""
        if after in _KEY_COMPOUNDS_AFTER or before in _KEY_COMPOUNDS_BEFORE:
            return None
    if word in _WHOLE_WORDS:
        return f"contains {word}"
    for secret in _EITHER_END_WORDS:
        if word.startswith(secret) or word.endswith(secret):
            return f"contains {secret}"
    for secret in _SUFFIX_WORDS:
        if word.endswith(secret) or (word == secret + "S" and secret != "TOKEN"):
            return f"contains {secret}"
    if word.endswith("AUTH") or (word.startswith("AUTH") and word not in _NOT_AUTH):
        return "contains AUTH"
    return None


def name_reason(name: str) -> str | None:
    """Why a variable or key name says it holds a secret (``"contains KEY"``), or ``None``."""
    words = name_words(name)
    if words == ["PWD"]:
        return None  # the shell's working directory
    for index in range(len(words)):
        reason = _word_reason(words, index)
        if reason:
            return reason
    return None


def is_secret_name(name: str) -> bool:
    return name_reason(name) is not None


def env_name_reason(name: str, value: str, allowed: Collection[str] = ()) -> str | None:
    """Why the variable ``name = value`` looks like a secret by its name, or ``None``: not when the user
    vouches for the name (``allowed``), nor for a flag whose value is a boolean
    (``HF_HUB_DISABLE_IMPLICIT_TOKEN = "1"``).  The value itself is judged apart, whatever its name."""
    if name in allowed or value.strip().lower() in BOOLEAN_VALUES:
        return None
    return name_reason(name)
