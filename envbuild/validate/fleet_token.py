"""The fleet token (``validate --fleet``): how strong it must be, where it is read, and what is keyed with it.

A token needs 128 bits from a generator, so that a handshake someone recorded cannot be brute-forced
offline.  envbuild cannot measure entropy; it refuses what cannot hold 128 bits and what is plainly
typed by hand (:func:`check_token`).  ``python3 -c 'import secrets; print(secrets.token_urlsafe(24))'``
makes one (32 characters, 192 bits).

The token is read once (``--fleet-token``, else ``$ENVBUILD_FLEET_TOKEN``) and the variable is taken
out of envbuild's environment right there (:func:`take_token`): no probe, rank process or ``[[checks]]``
command inherits it.  What the rank processes need is derived from it: one proof per rank
(:func:`proofs`), for a nonce node 0 draws for each run.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import string

from envbuild.errors import UsageError

TOKEN_ENV = "ENVBUILD_FLEET_TOKEN"
MAKE_ONE = "python3 -c 'import secrets; print(secrets.token_urlsafe(24))'"
MIN_HEX = 32  # 32 hex digits: 128 bits
MIN_OTHER = 22  # 22 characters of base64url (or any richer alphabet): 132 bits
MIN_DISTINCT = 8  # a generated token of either length has fewer with a probability under 1e-7
_HEX = re.compile(r"[0-9a-fA-F]+")


def token_problem(token: str) -> str | None:
    """Why ``token`` cannot be a fleet token (None: it can).  The token itself is never in the text."""
    if not token:
        return "no token given"
    if any(c.isspace() or not c.isprintable() for c in token):
        return "it holds spaces or control characters"
    if _HEX.fullmatch(token) and len(token) < MIN_HEX:
        return f"{len(token)} hex digits; at least {MIN_HEX} are needed (128 bits)"
    if len(token) < MIN_OTHER:
        return f"{len(token)} characters; {MIN_OTHER} or more are needed ({MIN_HEX} or more if hex)"
    if len(set(token)) < MIN_DISTINCT:
        return f"only {len(set(token))} different characters (a generated token has {MIN_DISTINCT} or more)"
    period = next((p for p in range(1, len(token) // 2 + 1) if _repeats(token, p)), None)
    if period is not None:
        return f"a piece of {period} characters repeated"
    return None


def _repeats(token: str, period: int) -> bool:
    return all(token[i] == token[i - period] for i in range(period, len(token)))


def check_token(token: str) -> None:
    """:class:`UsageError` (exit 2) when ``token`` is too weak (:func:`token_problem`), saying how to
    make one."""
    problem = token_problem(token)
    if problem is not None:
        raise UsageError(
            "--fleet needs a shared token of at least 128 bits from a generator (--fleet-token or "
            f"${TOKEN_ENV}, the same on every lot): {MIN_HEX}+ hex digits or {MIN_OTHER}+ characters of "
            f"base64url, at least {MIN_DISTINCT} different characters, not one piece repeated; this one: "
            f"{problem}. "
            f"Make one with `{MAKE_ONE}`"
        )


def take_token(given: str | None) -> str:
    """The token (``given``, else ``$ENVBUILD_FLEET_TOKEN``), checked; the variable leaves envbuild's
    environment here, so that no child process inherits it."""
    from_env = os.environ.pop(TOKEN_ENV, None)
    token = given or from_env or ""
    check_token(token)
    return token


def mac(token: str, *parts: object) -> str:
    """HMAC-SHA256 of the parts joined by ``|`` (each message kind starts with its own label)."""
    message = "|".join(str(p) for p in parts).encode()
    return hmac.new(token.encode(), message, hashlib.sha256).hexdigest()


def proofs(token: str, nonce: str, world: int) -> tuple[str, ...]:
    """What each rank of a run all-gathers over the group to prove it holds the token: one HMAC of the
    run's nonce and the rank, for every rank (each lot's rank process checks all of them)."""
    return tuple(mac(token, "proof", nonce, rank) for rank in range(world))


def is_hex(value: object, length: int = 64) -> bool:
    """``value`` is ``length`` hex digits (a MAC, a challenge): checked before any comparison."""
    return isinstance(value, str) and len(value) == length and all(c in string.hexdigits for c in value)
