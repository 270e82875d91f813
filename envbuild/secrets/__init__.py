"""The one secret policy: what looks like a secret, by name, by value, in a URL and by file, and how to
redact it.

Every place that could let a secret through uses this package: the profile loader (``[env]`` keys and
values), the requirement parser (:func:`url_reason` for a requirement's URL) and its messages, the
app-folder walker, the build-context walker, the lock's URLs (:func:`url_parts`), the validator's
``env.txt``, every report file and every output tail (:func:`redact_tail`).  The rules:

* **Names** (:mod:`.names`): a word list with exceptions (``MAX_TOKENS``, ``KEY_FRAMES``, a flag with
  a boolean value, ``[env] allow_names``).
* **Values** (:mod:`.values`): well-known token formats (each regex names its source), PEM and PuTTY
  private keys, and URLs that carry a secret.
* **URLs** (:mod:`.urls`): user info, secret-named query parameters, and the access token in the path
  of Cloudsmith, packagecloud and Gemfury URLs.
* **Files** (:mod:`.files`): credential files by name, any file whose bytes hold a secret value, and a
  secret-named key with a secret-shaped value inside a configuration file.
* **Redaction** (:func:`redact`) keeps the recognisable prefix and drops the rest, and runs before any
  cut and again after it (:func:`redact_tail`).
"""

from __future__ import annotations

from envbuild.secrets.files import config_key_reason, content_reason, file_name_reason, file_reason
from envbuild.secrets.names import BOOLEAN_VALUES, env_name_reason, is_secret_name, name_reason, name_words
from envbuild.secrets.urls import PLACEHOLDER_RE, Part, query_name_reason, redact_url, url_parts, url_reason
from envbuild.secrets.values import (
    MASK,
    REDACTED,
    is_secret_value,
    redact,
    redact_tail,
    redact_value,
    value_reason,
)

__all__ = [
    "BOOLEAN_VALUES",
    "MASK",
    "PLACEHOLDER_RE",
    "REDACTED",
    "Part",
    "config_key_reason",
    "content_reason",
    "env_name_reason",
    "file_name_reason",
    "file_reason",
    "is_secret_name",
    "is_secret_value",
    "name_reason",
    "name_words",
    "query_name_reason",
    "redact",
    "redact_tail",
    "redact_url",
    "redact_value",
    "url_parts",
    "url_reason",
    "value_reason",
]
