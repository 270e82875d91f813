"""Keep secrets out of reports: an allow-list for ``env.txt`` and redaction by the one secret policy.

``env.txt`` explains the environment a validation ran in, so it holds only the variables that do
that (:func:`is_allowed_name`: the CUDA/ROCm/PyTorch/NCCL/Python/threading families, search paths,
cache folders, pip/uv settings, locale); every other variable is counted, not written.  A written
value is redacted by :mod:`envbuild.secrets`: withheld whole when its name says secret (``HF_TOKEN``),
else with every token, private key and URL secret masked (``HF_HUB=hf_***``, ``?token=***``).  Free
text (check output, tracebacks, every report file) is redacted the same way, and the values of
secret-named variables are scrubbed from it wherever they occur; a tail is redacted before it is cut
and again after (:func:`redact_tail_text`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from envbuild.secrets import REDACTED, is_secret_name, redact, redact_tail, redact_value

__all__ = [
    "REDACTED",
    "env_lines",
    "is_allowed_name",
    "redact_env",
    "redact_tail_text",
    "redact_text",
    "secret_values",
]

MIN_SCRUB_LEN = 6  # shorter values are too likely to occur by chance in unrelated text

# Families of variables that change what a GPU/Python stack does (a prefix ends in "_" or is PYTHON).
ALLOWED_PREFIXES = (
    "CUDA_",
    "CUDNN_",
    "CUBLAS_",
    "NVIDIA_",
    "ROCR_",
    "ROCM_",
    "HIP_",
    "HSA_",
    "AMD_",
    "MIOPEN_",
    "PYTORCH_",
    "TORCH_",
    "TORCHINDUCTOR_",
    "TRITON_",
    "NCCL_",
    "RCCL_",
    "PYTHON",  # PYTHONPATH, PYTHONHASHSEED, PYTHONUNBUFFERED ...
    "CONDA_",
    "OMP_",
    "MKL_",
    "KMP_",
    "OPENBLAS_",
    "PIP_",
    "UV_",
    "HF_",  # HF_HOME, HF_HUB_CACHE, HF_HUB_OFFLINE; HF_TOKEN is withheld by name
    "TRANSFORMERS_",
    "XDG_",  # XDG_CACHE_HOME ...
    "LC_",
    "ENVBUILD_",
)
ALLOWED_NAMES = frozenset(
    {
        "PATH",
        "LD_LIBRARY_PATH",
        "LIBRARY_PATH",
        "CPATH",
        "VIRTUAL_ENV",
        "HOME",
        "TMPDIR",
        "LANG",
        "LANGUAGE",
        "TZ",
        "MAX_JOBS",
        "CC",
        "CXX",
        "TOKENIZERS_PARALLELISM",
    }
)


def is_allowed_name(name: str) -> bool:
    """Whether ``env.txt`` writes this variable (its value still redacted)."""
    return name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """The allowed variables of ``env``, each value redacted (withheld whole when its name says secret)."""
    return {name: redact_value(name, value) for name, value in env.items() if is_allowed_name(name)}


def env_lines(env: Mapping[str, str]) -> str:
    """``env.txt``: ``NAME=value`` for the allowed variables, sorted, then how many were left out."""
    shown = redact_env(env)
    text = "".join(f"{k}={v}\n" for k, v in sorted(shown.items()))
    others = len(env) - len(shown)
    if others:
        text += f"# {others} other variable{'s' if others != 1 else ''} not written (not on the allow-list)\n"
    return text


def secret_values(env: Mapping[str, str] | None = None) -> list[str]:
    """Values of secret-looking variables, longest first, long enough to scrub from free text."""
    source = os.environ if env is None else env
    values = {v for k, v in source.items() if is_secret_name(k) and len(v) >= MIN_SCRUB_LEN}
    return sorted(values, key=len, reverse=True)


def redact_text(text: str, env: Mapping[str, str] | None = None) -> str:
    """``text`` without the values of secret-named variables of ``env`` (default: the process
    environment) and with every secret value the policy recognises masked."""
    return redact(text, secret_values(env))


def redact_tail_text(text: str, limit: int, env: Mapping[str, str] | None = None) -> str:
    """The last ``limit`` characters of ``text``, redacted as :func:`redact_text` does, before the cut
    (a token whose start the cut removes is still recognised) and again after it."""
    return redact_tail(text, limit, secret_values(env))
