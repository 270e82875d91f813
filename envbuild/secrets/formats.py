"""Well-known token formats, each with its source: found where its literal prefix starts.

Matching starts only at a literal prefix found with :meth:`str.find` (not at every position), and a
prefix counts only at the start of a word, so the scan is linear in the text's length.
"""

from __future__ import annotations

import re

# (kind, literal prefixes, regex matched where a prefix starts, length of the public prefix kept).
# Matching starts only at a literal prefix found with str.find (not at every position), so a
# 64 MiB file is scanned in seconds at most; a prefix counts only at the start of a word.
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
    # HashiCorp Vault tokens: service "hvs.", batch "hvb.", recovery "hvr." (Vault 1.10+,
    # developer.hashicorp.com/vault/docs/concepts/tokens, "Token prefix").
    ("a Vault token", ("hvs.", "hvb.", "hvr."), re.compile(r"hv[sbr]\.[A-Za-z0-9_-]{20,}"), 4),
    # Stripe secret and restricted keys, live and test: sk_live_/rk_live_/sk_test_/rk_test_
    # (docs.stripe.com/keys, "Key types"; a test key still opens the account's test data).
    (
        "a Stripe secret key",
        ("sk_live_", "rk_live_", "sk_test_", "rk_test_"),
        re.compile(r"[sr]k_(?:live|test)_[A-Za-z0-9]{16,}"),
        8,
    ),
    # Google OAuth 2.0 access tokens "ya29." (gcloud's access_tokens.db, application credentials;
    # developers.google.com/identity/protocols/oauth2, the token endpoint's "access_token").
    ("a Google OAuth access token", ("ya29.",), re.compile(r"ya29\.[A-Za-z0-9_-]{20,}"), 5),
)
_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def tokens(text: str) -> list[tuple[int, int, str, int]]:
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
