"""Validators for every string a profile may carry.

Each ``check_*`` function returns ``None`` when the value is acceptable, else a message that says what
is wrong and, for closed sets, the valid choices.  Regexes use :func:`re.fullmatch` (``$`` would accept
a trailing newline).  Nothing here touches the filesystem; :mod:`envbuild.profile.paths` does that.

Decisions recorded here (see also the package docstring):

* ``[env]`` keys are shell-style identifiers.  ``PATH``, ``VIRTUAL_ENV`` and ``PYTHONHOME`` are
  reserved (envbuild sets them; overriding them would load a different interpreter than the one
  declared), ``LD_PRELOAD``/``LD_AUDIT`` are rejected (they inject code into every process), the
  ``*_VISIBLE_DEVICES`` selectors are rejected (devices are chosen at ``docker run`` time), and the
  ``ENVBUILD_`` prefix is reserved.  ``PYTHONPATH`` and ``LD_LIBRARY_PATH`` are allowed.
* Keys that look like secrets are rejected, and so are values that look like well-known token formats,
  private keys or URLs carrying credentials (the one policy: :mod:`envbuild.secrets`); the message
  shows only the redacted form.  Provide secrets at run time, never in the profile.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable

from packaging.version import InvalidVersion, Version

from envbuild.imageref import FORM as IMAGE_FORM
from envbuild.imageref import IMAGE_COMPONENT_RE, image_problem
from envbuild.secrets import env_name_reason, name_reason, value_reason

NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]*")
NAME_MAX = 64
TARGET_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,31}")
APT_NAME_RE = re.compile(r"[a-z0-9][a-z0-9+.-]+")
APT_VERSION_RE = re.compile(r"(?:[0-9]+:)?[0-9][A-Za-z0-9.+~-]*")
ENV_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
PY_VERSION_RE = re.compile(r"3\.[0-9]{1,2}")
ACCEL_VERSION_RE = re.compile(r"[0-9]{1,2}\.[0-9]{1,2}(?:\.[0-9]{1,3})?")
BLENDER_VERSION_RE = re.compile(r"[0-9]{1,2}\.[0-9]{1,2}(?:\.[0-9]{1,3})?")
MODULE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
JSON_KEY_RE = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*")

RESERVED_ENV = {
    "PATH": "envbuild sets PATH so that the declared venv comes first",
    "VIRTUAL_ENV": "envbuild sets it for the declared venv",
    "PYTHONHOME": "it would load a different Python than the declared one",
    "LD_PRELOAD": "it injects code into every process",
    "LD_AUDIT": "it injects code into every process",
    "CUDA_VISIBLE_DEVICES": "choose devices at run time (docker run --gpus / -e)",
    "NVIDIA_VISIBLE_DEVICES": "choose devices at run time (docker run --gpus / -e)",
    "HIP_VISIBLE_DEVICES": "choose devices at run time (docker run --device / -e)",
    "ROCR_VISIBLE_DEVICES": "choose devices at run time (docker run --device / -e)",
}
SECRET_HINT = "provide secrets at run time, never in the profile"
_CONTROL_RE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
# Characters that change what a reader sees without being visible: C1 controls (NEL splits lines for
# Python's splitlines), line/paragraph separators, bidirectional overrides ("Trojan Source"),
# zero-width space/word joiner and a stray BOM.  ZWJ/ZWNJ stay allowed (emoji, Indic scripts).
_INVISIBLE_RE = re.compile(
    "[\x80-\x9f\u061c\u200b\u200e\u200f\u2028\u2029\u202a-\u202e\u2060\u2066-\u2069\ufeff]"
)


# Every character str.splitlines splits at (tests/test_line_breaks.py checks the list against Python).
# pip reads a requirements file with splitlines: each of them starts a line pip reads, in a comment too.
LINE_BREAKS = "\n\v\f\r\x1c\x1d\x1e\x85\u2028\u2029"


def line_break(value: str) -> str | None:
    """The first character of ``value`` at which ``str.splitlines`` splits it, else None."""
    pieces = value.splitlines()
    if len(pieces) > 1 or (pieces[0] != value if pieces else bool(value)):
        return value[len(pieces[0]) if pieces else 0]
    return None


def _clip(value: str, limit: int = 60) -> str:
    return value if len(value) <= limit else value[: limit - 3] + "..."


def did_you_mean(value: str, valid: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` when a valid value is close, else an empty string."""
    import difflib  # on a miss only

    close = difflib.get_close_matches(value, list(valid), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def has_control(value: str) -> bool:
    """True when ``value`` holds a newline, NUL, another control character (tab allowed) or an
    invisible/direction-changing Unicode character."""
    return _CONTROL_RE.search(value) is not None or _INVISIBLE_RE.search(value) is not None


def check_text(value: str, *, max_len: int = 1024, allow_tab: bool = False) -> str | None:
    """Free text (descriptions, env values, argv items): one line, visible characters only.

    A tab is refused except in argv items: a description or env value lands in a Dockerfile
    ``LABEL``/``ENV`` where the renderer refuses every control character.
    """
    invisible = _INVISIBLE_RE.search(value)
    if invisible:
        return (
            f"must not contain invisible or direction-changing characters "
            f"(found U+{ord(invisible.group()):04X} at position {invisible.start()})"
        )
    if has_control(value) or ("\t" in value and not allow_tab):
        return "must not contain newlines, tabs, NUL or other control characters"
    if len(value) > max_len:
        return f"is too long ({len(value)} characters, at most {max_len})"
    return None


def check_name(value: str, *, what: str = "a name") -> str | None:
    if len(value) > NAME_MAX:
        return f"{what} is at most {NAME_MAX} characters, got {len(value)}"
    if not NAME_RE.fullmatch(value):
        return f"{value!r} is not a valid {what}: use [a-z0-9][a-z0-9._-]* (lowercase letters, digits, . _ -)"
    return None


def check_project_name(value: str) -> str | None:
    """A distribution name as PEP 508 allows it (packaging's grammar: a requirement that is its name
    alone; compared after PEP 503 normalisation)."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        plain = Requirement(value).name == value
    except InvalidRequirement:
        plain = False
    if len(value) > NAME_MAX or not plain:
        return (
            f"{value!r} is not a distribution name: letters, digits, '.', '_' and '-', starting and ending "
            "with a letter or digit (e.g. 'flash-attn')"
        )
    return None


def check_profile_name(value: str) -> str | None:
    """A profile name is also the repository part of the image name (``envbuild/<name>:<hash>``)."""
    problem = check_name(value, what="profile name")
    if problem is None and not IMAGE_COMPONENT_RE.fullmatch(value):
        return (
            f"{value!r} is not a valid profile name: it becomes the image name envbuild/{value}, so letters "
            "and digits must be joined by '.', '_', '__' or dashes, with no separator at either end"
        )
    return problem


def check_target(value: str) -> str | None:
    if not TARGET_RE.fullmatch(value):
        return f"{value!r} is not a card id: use a lowercase slug like 'h100' (see `envbuild targets`)"
    return None


def check_apt(value: str) -> str | None:
    name, sep, version = value.partition("=")
    if not APT_NAME_RE.fullmatch(name) or len(name) > 128:
        return (
            f"{value!r} is not a Debian package name: [a-z0-9][a-z0-9+.-]+ (Debian policy 5.6.1), "
            "optionally =VERSION"
        )
    if sep and not (APT_VERSION_RE.fullmatch(version) and len(version) <= 128):
        return f"{value!r} has an invalid version: use [epoch:]digits then letters, digits or . + ~ - only"
    return None


def secret_key_reason(key: str) -> str | None:
    """Why an env key looks like it holds a secret, or ``None`` (the policy: :mod:`envbuild.secrets`)."""
    return name_reason(key)


def check_env_key(key: str, value: str | None = None, allowed: Collection[str] = ()) -> str | None:
    """An ``[env]`` name; with its ``value``, a flag with a boolean value is not a secret name, and
    neither is a name in ``allowed`` (``[env] allow_names``): :func:`envbuild.secrets.env_name_reason`."""
    if not ENV_KEY_RE.fullmatch(key) or len(key) > 128:
        return f"{key!r} is not a valid variable name: use [A-Za-z_][A-Za-z0-9_]*"
    reason = secret_key_reason(key) if value is None else env_name_reason(key, value, allowed)
    if reason:
        return (
            f"{key!r} looks like a secret ({reason}): {SECRET_HINT}; if it is not one, list it in "
            "[env] allow_names"
        )
    if key.upper() in RESERVED_ENV:
        return f"{key!r} is reserved: {RESERVED_ENV[key.upper()]}"
    if key.upper().startswith("ENVBUILD_"):
        return f"{key!r} is reserved: the ENVBUILD_ prefix belongs to envbuild"
    return None


def secret_value_reason(value: str) -> str | None:
    """Why a value looks like a secret (``"holds a GitHub token"``), or ``None``; never the value."""
    found = value_reason(value)
    return f"holds {found}" if found else None


def secret_value_problems(raw: object, skip: Iterable[str] = ()) -> list[tuple[str, str]]:
    """``(key, message)`` for every string anywhere in a profile document that holds a secret value
    (a description, a check's argv, an expected value ...: each could reach a label, the lock or the
    image), except at the keys in ``skip`` (those already have an issue).  Never the value itself."""
    skipped = set(skip)
    found: list[tuple[str, str]] = []
    stack: list[tuple[object, str]] = [(raw, "")]  # iterative: a hostile document nests deeply
    while stack:
        value, key = stack.pop()
        if isinstance(value, str):
            reason = secret_value_reason(value)
            if reason and key not in skipped:
                found.append((key, f"value {reason}: {SECRET_HINT}"))
        elif isinstance(value, dict):
            for name, item in reversed(value.items()):
                part = name if ENV_KEY_RE.fullmatch(str(name)) else repr(name)
                stack.append((item, f"{key}.{part}" if key else part))
        elif isinstance(value, list):
            stack.extend((item, f"{key}[{index}]") for index, item in reversed(list(enumerate(value))))
    return found


def check_env_value(value: str) -> str | None:
    problem = check_text(value, max_len=4096)
    if problem:
        return problem
    reason = secret_value_reason(value)
    if reason:
        return f"value {reason}: {SECRET_HINT}"
    return None


def check_image(value: str) -> str | None:
    problem = image_problem(value)
    if problem is None:
        return None
    return f"{_clip(value)!r} is not a Docker image reference ({problem}): use {IMAGE_FORM}"


def check_python_version(value: str) -> str | None:
    if not PY_VERSION_RE.fullmatch(value):
        return f"{value!r} is not a Python version: use MAJOR.MINOR like '3.11'"
    return None


def check_pep440(value: str, *, what: str) -> str | None:
    if has_control(value) or value != value.strip() or len(value) > 64:
        return f"{_clip(value)!r} is not a valid {what}"
    try:
        parsed = Version(value)
    except (InvalidVersion, ValueError):  # ValueError: a release number too long to convert
        return f"{value!r} is not a valid {what} (PEP 440), e.g. '2.7.1'"
    if parsed.local is not None:
        return (
            f"{value!r}: drop the local tag '+{parsed.local}'; "
            "envbuild adds the variant (cu128, rocm6.3, cpu)"
        )
    return None


def check_accel_version(value: str) -> str | None:
    if not ACCEL_VERSION_RE.fullmatch(value):
        return f"{value!r} is not a CUDA/ROCm version: use MAJOR.MINOR like '12.8' or '6.3'"
    return None


SNAPSHOT_RE = re.compile(r"([0-9]{4})([0-9]{2})([0-9]{2})T([0-9]{2})([0-9]{2})([0-9]{2})Z")


def check_snapshot(value: str) -> str | None:
    """A snapshot archive's instant, ``YYYYMMDDTHHMMSSZ`` (UTC), as snapshot.debian.org and
    snapshot.ubuntu.com name them."""
    import datetime

    match = SNAPSHOT_RE.fullmatch(value)
    if match is None:
        return f"{value!r} is not a snapshot time: use YYYYMMDDTHHMMSSZ in UTC, e.g. '20261130T000000Z'"
    try:
        year, month, day, hour, minute, second = (int(g) for g in match.groups())
        datetime.datetime(year, month, day, hour, minute, second)
    except ValueError as exc:
        return f"{value!r} is not a real date and time ({exc}): use YYYYMMDDTHHMMSSZ in UTC"
    return None


def check_blender_version(value: str) -> str | None:
    if not BLENDER_VERSION_RE.fullmatch(value):
        return f"{value!r} is not a Blender version: use MAJOR.MINOR[.PATCH] like '4.5.3'"
    return None


def check_module(value: str) -> str | None:
    if not MODULE_RE.fullmatch(value) or len(value) > 128:
        return f"{value!r} is not an importable module name (e.g. 'flash_attn')"
    return None


def check_rel_path(value: str) -> str | None:
    """Syntax of a path that must stay inside its folder: relative, no ``..``, no ``~``."""
    if value == "":
        return "path is empty: give a path relative to the profile's folder"
    if has_control(value) or "\\" in value:
        return (
            f"{_clip(value)!r}: a path must not contain control characters or backslashes; "
            "use forward slashes, relative to the profile's folder"
        )
    if value.startswith("/"):
        return f"{value!r} is absolute: use a path relative to the profile's folder"
    if value.startswith("~"):
        return f"{value!r} points into a home directory: use a path relative to the profile's folder"
    if ".." in value.split("/"):
        return f"{value!r} leaves the profile's folder ('..'): keep files inside it"
    if len(value) > 512:
        return f"path is too long ({len(value)} characters, at most 512)"
    return None
