# mypy: disable-error-code="import-not-found,no-untyped-call"
"""Probe: the interpreter actually used (executable, version, implementation, prefix, kind) and which
``python`` / ``python3`` a shell would run (the first on PATH)."""

from __future__ import annotations

import os
import platform
import shutil
import sys

from _probe_common import emit, read_args

# PEP 425 abbreviations of sys.implementation.name (wheel tags: cp311, pp310, ...).
TAGS = {"cpython": "cp", "pypy": "pp", "ironpython": "ip", "jython": "jy", "graalpy": "gp"}


def same_interpreter(a: str, b: str) -> bool:
    """Two paths start the same environment: the same binary, from the same folder (a venv's
    ``bin/python`` links to its base interpreter; the folder is what makes it the venv)."""
    real = os.path.realpath
    return real(a) == real(b) and real(os.path.dirname(a)) == real(os.path.dirname(b))


def kind(prefix: str, base_prefix: str) -> str:
    if prefix != base_prefix or os.path.isfile(os.path.join(prefix, "pyvenv.cfg")):
        return "venv"
    conda_prefix = os.environ.get("CONDA_PREFIX")
    if os.path.isdir(os.path.join(prefix, "conda-meta")) or (
        conda_prefix and os.path.realpath(conda_prefix) == os.path.realpath(prefix)
    ):
        return "conda"
    if os.path.realpath(prefix) in ("/usr", "/usr/local"):
        return "system"
    return "other"


def on_path(name: str) -> dict[str, object]:
    found = shutil.which(name)
    return {
        "path": found,
        "realpath": os.path.realpath(found) if found else None,
        "is_under_test": bool(found and sys.executable and same_interpreter(found, sys.executable)),
    }


read_args()
emit(
    {
        "executable": sys.executable,
        "realpath": os.path.realpath(sys.executable),
        "version": platform.python_version(),
        "version_info": list(sys.version_info[:3]),
        "implementation": platform.python_implementation(),
        "implementation_tag": TAGS.get(sys.implementation.name, sys.implementation.name),
        "prefix": sys.prefix,
        "base_prefix": sys.base_prefix,
        "in_venv": sys.prefix != sys.base_prefix,
        "kind": kind(sys.prefix, sys.base_prefix),
        "machine": platform.machine(),
        "virtual_env_var": os.environ.get("VIRTUAL_ENV"),
        "conda_prefix_var": os.environ.get("CONDA_PREFIX"),
        "on_path": {name: on_path(name) for name in ("python", "python3")},
    }
)
