# mypy: disable-error-code="import-not-found,no-untyped-call"
"""Probe: the interpreter actually used (executable, version, prefix, venv)."""

from __future__ import annotations

import os
import platform
import sys

from _probe_common import emit, read_args

read_args()
emit(
    {
        "executable": sys.executable,
        "realpath": os.path.realpath(sys.executable),
        "version": platform.python_version(),
        "version_info": list(sys.version_info[:3]),
        "implementation": platform.python_implementation(),
        "prefix": sys.prefix,
        "base_prefix": sys.base_prefix,
        "in_venv": sys.prefix != sys.base_prefix,
        "machine": platform.machine(),
        "virtual_env_var": os.environ.get("VIRTUAL_ENV"),
    }
)
