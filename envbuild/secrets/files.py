"""Credential files: by name, by the secret values their bytes hold, and by a secret-named key with a
secret-shaped value inside a configuration file.

The key rule (:func:`config_key_reason`) reads INI, TOML, JSON, YAML and dotenv files: from each place a
secret word occurs (found with :meth:`str.find`, so the scan is linear), a key at a line's start or
quoted (as JSON writes it), ``=`` or ``:``, an optional quote, and a value. It refuses a key whose name
is secret by the word list (:mod:`envbuild.secrets.names`) holding a value shaped like a secret: at
least 16 characters, no spaces, no angle brackets, quotes, ``$``/``{}``/``()``/``[]`` (templates and
references), no ``:`` (URLs are judged by the URL rule), not all digits, and mixing letters with digits
or upper with lower case. So ``aws_secret_access_key = wJalrXUt...`` is refused and a tokenizer's
special tokens (``"bos_token": "<|begin_of_text|>"``, ``"pad_token": "[PAD]"``) are not.
"""

from __future__ import annotations

import re

from envbuild.secrets.names import name_reason
from envbuild.secrets.values import value_reason

# Credential files and folders by name (lower-cased).
_SECRET_FILE_NAMES = frozenset(
    {
        ".env",
        ".envrc",  # direnv
        ".netrc",
        "_netrc",
        ".pypirc",
        ".npmrc",
        ".git-credentials",
        ".dockercfg",
        ".pgpass",  # PostgreSQL's password file (postgresql.org/docs, "The Password File")
        ".vault-token",  # Vault CLI's token helper file (Vault docs, "Token helpers")
        "kaggle.json",  # Kaggle API credentials (github.com/Kaggle/kaggle-api, "API credentials")
        "secrets.toml",  # Streamlit's .streamlit/secrets.toml (docs.streamlit.io, "Secrets management")
        "credentials.json",  # Google OAuth client / gcloud
        "application_default_credentials.json",
        "client_secret.json",
        "access_tokens.db",  # gcloud's cached OAuth access tokens (~/.config/gcloud)
        "credentials.db",  # gcloud's stored credentials (~/.config/gcloud)
        "kubeconfig",
        ".ssh",
        ".aws",
        ".docker",
        ".kube",
        ".gnupg",
        ".azure",
        ".gcloud",
    }
)
# OpenSSH's default private key names (ssh-keygen(1)); their *.pub halves are public.
_SSH_KEY_NAMES = frozenset({"id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "id_ecdsa_sk", "id_ed25519_sk"})
_KEYSTORE_SUFFIXES = (".p12", ".pfx", ".jks", ".keystore", ".kdbx")  # binary key stores
_ASN1_SEQUENCE = (b"\x30\x82", b"\x30\x81")  # a DER private key starts with a SEQUENCE
# Configuration files the key rule reads: by suffix, dotenv files, and files without a suffix
# (wandb/settings, .pgpass-like files).
_CONFIG_SUFFIXES = (
    ".ini",
    ".cfg",
    ".conf",
    ".config",
    ".toml",
    ".json",
    ".yaml",
    ".yml",
    ".env",
    ".properties",
)
# A key-value entry from the key's first character: the key, an optional closing quote (JSON), ``=`` or
# ``:``, an optional quote and a secret-shaped value that runs to its closing quote or the line's end.
_ENTRY_RE = re.compile(
    r"(?P<key>[A-Za-z_][A-Za-z0-9_.-]{0,127})\"?[ \t]*[:=][ \t]*"
    r"(?P<q>[\"']?)(?P<value>[^\s\"'<>`$:{}()\[\],;|\\]{16,})(?P=q)[ \t]*(?:[,#;}\]]|$)",
    re.MULTILINE,
)
_LEAD_RE = re.compile(r"[ \t]*(?:export[ \t]+)?")  # what may precede a key on its line
_KEY_RUN_RE = re.compile(r"[A-Za-z0-9_.-]*")
_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
# Every secret name holds one of these (lower case): the scan starts only where one occurs (str.find),
# so a file without them costs a few passes of str.find, and each key is read once.
_HINTS = ("key", "token", "secret", "pass", "pwd", "cred", "cookie", "auth", "pat")
_MIXED = (re.compile(r"[0-9]"), re.compile(r"[a-z]"), re.compile(r"[A-Z]"))


def file_name_reason(name: str) -> str | None:
    """Why a file or folder name alone marks it as holding credentials, or ``None``."""
    lowered = name.lower()
    if lowered in _SECRET_FILE_NAMES or lowered.startswith(".env.") or lowered.startswith("kubeconfig"):
        return "is a credentials file or folder"
    if lowered.startswith("service-account") and lowered.endswith(".json"):
        return "is a cloud service-account key"
    if lowered in _SSH_KEY_NAMES:
        return "looks like an SSH private key"
    if lowered.endswith(".ppk"):
        return "is a PuTTY private key"
    if lowered.endswith(_KEYSTORE_SUFFIXES):
        return "is a key store"
    return None


def is_config_name(name: str) -> bool:
    """Whether the key rule reads the file ``name``: a configuration format, or no suffix at all."""
    lowered = name.lower()
    return lowered.endswith(_CONFIG_SUFFIXES) or lowered.startswith(".env") or "." not in lowered.lstrip(".")


def _secret_shaped(value: str) -> bool:
    if value.isdigit() or value.startswith(("/", ".", "~", "-")):
        return False
    digit, lower, upper = (pattern.search(value) is not None for pattern in _MIXED)
    return (digit and (lower or upper)) or (lower and upper)


def _entry_at(text: str, pos: int) -> re.Match[str] | None:
    """The key-value entry whose key holds ``pos``, when the key starts a line or follows a quote."""
    start, limit = pos, max(0, pos - 128)
    while start > limit and text[start - 1] in _KEY_CHARS:
        start -= 1
    if start and text[start - 1] != '"':
        line = text.rfind("\n", 0, start) + 1
        if start - line > 64 or not _LEAD_RE.fullmatch(text, line, start):
            return None
    return _ENTRY_RE.match(text, start)


def config_key_reason(text: str) -> str | None:
    """The first secret-named key holding a secret-shaped value in configuration ``text``, or ``None``."""
    lowered = text.lower()
    hits: list[int] = []
    for hint in _HINTS:
        pos = lowered.find(hint)
        while pos != -1:
            hits.append(pos)
            pos = lowered.find(hint, pos + 1)
    read_to = -1
    for pos in sorted(hits):
        if pos < read_to:
            continue  # inside a key already read
        run = _KEY_RUN_RE.match(text, pos)
        read_to = run.end() if run else pos + 1
        entry = _entry_at(text, pos)
        if entry and _secret_shaped(entry.group("value")) and name_reason(entry.group("key")):
            return f"a value under the secret-named key {entry.group('key')!r}"
    return None


def content_reason(data: bytes, name: str | None = None) -> str | None:
    """What secret the bytes of a file hold, or ``None`` (scanned as Latin-1: every format is ASCII).
    With the file's ``name``, a configuration file is also read by the key rule."""
    text = data.decode("latin-1")
    reason = value_reason(text)
    if reason is None and '"private_key"' in text and '"client_email"' in text:
        reason = "a cloud service-account key"  # Google's JSON key files
    if reason is None and name is not None and is_config_name(name):
        reason = config_key_reason(text)
    return reason


def file_reason(name: str, data: bytes | None = None) -> str | None:
    """Why the file ``name`` (with its bytes, when given) must not go into a bundle or an image."""
    reason = file_name_reason(name)
    if reason is not None or data is None:
        return reason
    if name.lower().endswith(".key") and data.startswith(_ASN1_SEQUENCE):
        return "is a private key (DER)"
    found = content_reason(data, name)
    return f"holds {found}" if found else None
