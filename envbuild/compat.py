"""Names the standard library gained after Python 3.10, the floor ``pyproject.toml`` declares.

One place for the fallbacks, so a module never imports a 3.11-only name directly (mypy checks the package
as Python 3.10, and ``scripts/smoke.sh`` runs it on 3.10).
"""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, published as tomli (a dependency there)
    import tomli as tomllib

__all__ = ["tomllib"]
