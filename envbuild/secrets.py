"""The one secret policy: what looks like a secret, by name, by value and by file, and how to redact it.

Every place that could let a secret through uses this module: the profile loader (``[env]`` keys and
values), the requirement parser's messages, the app-folder walker, the build-context walker, the
validator's ``env.txt`` and every report file.  The rules:

* **Names** (:func:`name_reason`) are split into word parts (``_``, ``-``, ``.``, camelCase): a part
  that *is* ``KEY``/``PAT``/``PASS``/``PWD``/``CREDS``/``COOKIE``, that starts or ends with ``SECRET``,
  ``PASSWORD``, ``PASSWD``, ``PASSPHRASE`` or ``CREDENTIAL``, that ends with ``TOKEN``, ``APIKEY``,
  ``ACCESSKEY``, ``PRIVATEKEY``, ``SECRETKEY`` or ``SSHKEY`` (or is one of those plus ``S``), and
  ``AUTH`` words other than ``AUTHOR``/``AUTHORITY``.  So ``OPENAI_KEY``, ``SSH_KEY``, ``GITHUB_PAT``
  and ``PASSPHRASE`` are secrets; ``KEYBOARD``, ``MONKEY``, ``TOKENIZERS_PARALLELISM``, ``PATH`` and
  ``PWD`` are not.
* **Values** (:func:`value_reason`): well-known token formats (each regex below names its source),
  PEM private keys, and URLs whose user-info holds a credential (``user:pass@``, ``:pw@``,
  ``token@``; a bare user name on an ``ssh`` URL, such as ``git@``, is not a credential).
* **Files** (:func:`file_reason`): credential files by name (``.env``, ``.netrc``, ``credentials.json``,
  ``service-account*.json``, ``kubeconfig``, SSH keys ...) and any file whose bytes hold a secret value
  (a private key in a ``*.pem``, a token in a config file).
* **Redaction** (:func:`redact`) keeps the recognisable prefix and drops the rest: ``hf_***``,
  ``sk-***``, ``AKIA***``, ``https://***@host/...``, a PEM block reduced to its BEGIN/END lines.  A
  redacted form never contains any character of the value beyond its public prefix.

Only :mod:`re` is imported: the policy runs on the plain ``envbuild check`` path.
"""

from __future__ import annotations

import re

MASK = "***"
REDACTED = "[REDACTED]"  # a whole value withheld because its name says it is secret

# ---- names ---------------------------------------------------------------------------------------
_WHOLE_WORDS = frozenset({"KEY", "KEYS", "PAT", "PATS", "PASS", "PWD", "CREDS", "COOKIE", "COOKIES"})
_EITHER_END_WORDS = ("SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL")  # CLIENTSECRET, SECRETS
_SUFFIX_WORDS = ("TOKEN", "APIKEY", "ACCESSKEY", "PRIVATEKEY", "SECRETKEY", "SSHKEY", "AUTHKEY")
_NOT_AUTH = frozenset({"AUTHOR", "AUTHORS", "AUTHORITY", "AUTHORITIES"})
_CAMEL_RE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD_SPLIT_RE = re.compile(r"[^A-Za-z0-9]+")


def name_words(name: str) -> list[str]:
    """``hfToken`` -> ``["HF", "TOKEN"]``; ``OPENAI_API_KEY`` -> ``["OPENAI", "API", "KEY"]``."""
    return [w.upper() for part in _WORD_SPLIT_RE.split(name) for w in _CAMEL_RE.split(part) if w]


def name_reason(name: str) -> str | None:
    """Why a variable or key name says it holds a secret (``"contains KEY"``), or ``None``."""
    words = name_words(name)
    if words == ["PWD"]:
        return None  # the shell's working directory
    for word in words:
        if word in _WHOLE_WORDS:
            return f"contains {word}"
        for secret in _EITHER_END_WORDS:
            if word.startswith(secret) or word.endswith(secret):
                return f"contains {secret}"
        for secret in _SUFFIX_WORDS:
            if word.endswith(secret) or word == secret + "S":
                return f"contains {secret}"
        if word.endswith("AUTH") or (word.startswith("AUTH") and word not in _NOT_AUTH):
            return "contains AUTH"
    return None


def is_secret_name(name: str) -> bool:
    return name_reason(name) is not None


# ---- values --------------------------------------------------------------------------------------
# (kind, literal prefixes, regex matched where a prefix starts, length of the public prefix kept).
# Matching starts only at a literal prefix found with str.find (not at every position), so a
# 64 MiB file is scanned in well under a second; a prefix counts only at the start of a word.
_TOKEN_FORMATS: tuple[tuple[str, tuple[str, ...], re.Pattern[str], int], ...] = (
    # Hugging Face user access tokens: "hf_" + 34 letters/digits (huggingface.co/docs/hub/security-tokens).
    ("a Hugging Face access token", ("hf_",), re.compile(r"hf_[A-Za-z0-9]{30,}"), 3),
    # OpenAI keys "sk-...", project keys "sk-proj-...", Anthropic "sk-ant-..." (vendors' API key docs).
    ("an API access token (sk-)", ("sk-",), re.compile(r"sk-[A-Za-z0-9_-]{20,}"), 3),
    # GitHub tokens: ghp_/gho_/ghu_/ghs_/ghr_ + 36, fine-grained "github_pat_" + 82
    # (github.blog 2021-04-05 "Behind GitHub's new authentication token formats").
    (
        "a GitHub access token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        re.compile(r"gh[pousr]_[A-Za-z0-9]{30,}"),
        4,
    ),
    ("a GitHub access token", ("github_pat_",), re.compile(r"github_pat_[A-Za-z0-9_]{22,}"), 11),
    # GitLab personal access tokens: "glpat-" + 20 (docs.gitlab.com, "Token prefixes").
    ("a GitLab access token", ("glpat-",), re.compile(r"glpat-[A-Za-z0-9_-]{20,}"), 6),
    # Slack bot/app/user/refresh tokens: xoxb-, xoxa-, xoxp-, xoxr- (api.slack.com, "Token types").
    (
        "a Slack access token",
        ("xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-"),
        re.compile(r"xox[abprs]-[A-Za-z0-9-]{10,}"),
        5,
    ),
    # AWS access key ids: AKIA (long-term) / ASIA (temporary) + 16 (AWS IAM, "Unique identifiers").
    ("an AWS access key id", ("AKIA", "ASIA"), re.compile(r"A[KS]IA[0-9A-Z]{16}(?![A-Za-z0-9_])"), 4),
    # JSON Web Tokens: base64url("{...") header "eyJ", payload, signature (RFC 7519).
    (
        "a JSON Web Token (an access token)",
        ("eyJ",),
        re.compile(r"eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*"),
        3,
    ),
)
_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
# PEM private keys of every kind: "RSA", "EC", "DSA", "OPENSSH", "ENCRYPTED", plain PKCS#8 (RFC 7468),
# and OpenPGP armour "PGP PRIVATE KEY BLOCK" (RFC 4880).  A block without its END line runs to the end.
_PEM_BEGIN_RE = re.compile(r"-----BEGIN (?P<label>[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----")
_PEM_BLOCK_RE = re.compile(
    r"-----BEGIN (?P<label>[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----.*?(?:-----END [A-Z0-9 ]*-----|\Z)",
    re.DOTALL,
)
# URL user-info (RFC 3986 3.2.1): everything between "scheme://" and "@" in the authority.  Found from
# each "://" (str.find), the scheme read backwards from there: linear time on any input.
_USERINFO_RE = re.compile(r"[^/?#\s@]+@")
_SCHEME_TAIL_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*\Z")


# Stand-ins that hold no secret: a redacted form ("***", "[REDACTED]"), an elision, a <placeholder>
# or a ${VAR}/$VAR reference (a template, filled in at run time).
_PLACEHOLDER_RE = re.compile(
    r"\**|\.{3}|\[REDACTED\]|<[^<>]*>|\$\{[A-Za-z_][A-Za-z0-9_]*\}|\$[A-Za-z_][A-Za-z0-9_]*"
)


def _userinfo_is_secret(scheme: str, info: str) -> bool:
    # A password in any form ("user:pass", ":pw"), or a lone token on a non-ssh URL ("https://TOKEN@").
    # "git+ssh://git@host" names the account only: the key stays on the machine.
    user, colon, password = info.partition(":")
    if colon:
        return not _PLACEHOLDER_RE.fullmatch(password)
    return not scheme.lower().endswith("ssh") and not _PLACEHOLDER_RE.fullmatch(user)


def _tokens(text: str) -> list[tuple[int, int, str, int]]:
    """Every token-format match as (start, end, kind, public prefix length), in text order."""
    found: list[tuple[int, int, str, int]] = []
    for kind, literals, pattern, keep in _TOKEN_FORMATS:
        for literal in literals:
            pos = text.find(literal)
            while pos != -1:
                match = None
                if pos == 0 or text[pos - 1] not in _WORD_CHARS:
                    match = pattern.match(text, pos)
                if match:
                    found.append((pos, match.end(), kind, keep))
                pos = text.find(literal, match.end() if match else pos + 1)
    return sorted(found)


def _userinfos(text: str) -> list[tuple[int, int]]:
    """(start, end) of each secret user-info, from just after "://" to the "@" included."""
    found: list[tuple[int, int]] = []
    pos = text.find("://")
    while pos != -1:
        info = _USERINFO_RE.match(text, pos + 3)
        if info:
            scheme = _SCHEME_TAIL_RE.search(text, max(0, pos - 64), pos)
            if scheme and _userinfo_is_secret(scheme.group(), info.group()[:-1]):
                found.append((pos + 3, info.end()))
        pos = text.find("://", pos + 3)
    return found


def value_reason(value: str) -> str | None:
    """What secret ``value`` holds (``"a GitHub access token"``), or ``None``."""
    if "PRIVATE KEY" in value and _PEM_BEGIN_RE.search(value):
        return "a private key"
    tokens = _tokens(value)
    if tokens:
        return tokens[0][2]
    for start, end in _userinfos(value):
        return "a URL with a password" if ":" in value[start:end] else "a URL with a token as its user name"
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


def redact(text: str, also: tuple[str, ...] | list[str] = ()) -> str:
    """``text`` with every secret value replaced by its redacted form.

    ``also``: further literal values to withhold (for example the values of secret-named variables),
    replaced by ``[REDACTED]``; the longest first, so that a value containing another goes whole.
    """
    for value in sorted(also, key=len, reverse=True):
        if value:
            text = text.replace(value, REDACTED)
    if "PRIVATE KEY" in text:
        text = _PEM_BLOCK_RE.sub(lambda m: f"-----BEGIN {m.group('label')}----- {MASK}", text)
    tokens = _tokens(text)
    if tokens:
        text = _replace(text, [(s, e, text[s : s + keep] + MASK) for s, e, _, keep in tokens])
    infos = _userinfos(text)
    if infos:
        text = _replace(text, [(s, e, MASK + "@") for s, e in infos])
    return text


def redact_value(name: str, value: str) -> str:
    """One variable's value as it may be shown: withheld whole when the name says secret, else redacted."""
    return REDACTED if is_secret_name(name) else redact(value)


# ---- files ---------------------------------------------------------------------------------------
# Credential files by name (lower-cased).  Folders: ~/.ssh, ~/.aws, ~/.docker, ~/.kube, ~/.gnupg.
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
        "credentials.json",  # Google OAuth client / gcloud
        "application_default_credentials.json",
        "client_secret.json",
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


def file_name_reason(name: str) -> str | None:
    """Why a file or folder name alone marks it as holding credentials, or ``None``."""
    lowered = name.lower()
    if lowered in _SECRET_FILE_NAMES or lowered.startswith(".env.") or lowered.startswith("kubeconfig"):
        return "is a credentials file or folder"
    if lowered.startswith("service-account") and lowered.endswith(".json"):
        return "is a cloud service-account key"
    if lowered in _SSH_KEY_NAMES:
        return "looks like an SSH private key"
    if lowered.endswith(_KEYSTORE_SUFFIXES):
        return "is a key store"
    return None


def content_reason(data: bytes) -> str | None:
    """What secret the bytes of a file hold, or ``None`` (scanned as Latin-1: every format is ASCII)."""
    text = data.decode("latin-1")
    reason = value_reason(text)
    if reason is None and '"private_key"' in text and '"client_email"' in text:
        reason = "a cloud service-account key"  # Google's JSON key files
    return reason


def file_reason(name: str, data: bytes | None = None) -> str | None:
    """Why the file ``name`` (with its bytes, when given) must not go into a bundle or an image."""
    reason = file_name_reason(name)
    if reason is not None or data is None:
        return reason
    if name.lower().endswith(".key") and data.startswith(_ASN1_SEQUENCE):
        return "is a private key (DER)"
    found = content_reason(data)
    return f"holds {found}" if found else None
