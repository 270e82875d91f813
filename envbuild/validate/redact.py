"""Keep secrets out of reports: redact secret-looking environment variables and their values."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

REDACTED = "[REDACTED]"
SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSW(OR)?D|PASS$|KEY|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|SIGNATURE|CERT_PASS",
    re.IGNORECASE,
)
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)[^/@\s:]+:[^/@\s]+@", re.IGNORECASE)
MIN_SCRUB_LEN = 6  # shorter values are too likely to occur by chance in unrelated text


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env`` with secret-looking names redacted and credentials removed from URLs."""
    out: dict[str, str] = {}
    for name, value in env.items():
        if is_secret_name(name):
            out[name] = REDACTED
        else:
            out[name] = _URL_CREDENTIALS.sub(rf"\g<scheme>{REDACTED}@", value)
    return out


def secret_values(env: Mapping[str, str] | None = None) -> list[str]:
    """Values of secret-looking variables, longest first, long enough to scrub from free text."""
    source = os.environ if env is None else env
    values = {v for k, v in source.items() if is_secret_name(k) and len(v) >= MIN_SCRUB_LEN}
    return sorted(values, key=len, reverse=True)


def redact_text(text: str, env: Mapping[str, str] | None = None) -> str:
    """Replace every secret value from the environment, and URL credentials, in ``text``."""
    for value in secret_values(env):
        text = text.replace(value, REDACTED)
    return _URL_CREDENTIALS.sub(rf"\g<scheme>{REDACTED}@", text)
