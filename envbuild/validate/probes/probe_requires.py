# mypy: disable-error-code="import-not-found,no-untyped-call"
"""Probe: which installed distributions each installed distribution requires (canonical names).

The packages stage runs it only when a broken requirement belongs to a distribution the lock does not
name: whether something the lock names needs that distribution (directly or not) decides between a
failure and a warning.  A requirement whose environment marker cannot be evaluated is kept (it may
apply), so the graph errs towards "needed".
"""

from __future__ import annotations

import re
from importlib import metadata
from typing import Any

from _probe_common import emit, read_args

read_args()


def canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def load_requirement() -> Any:
    try:
        from packaging.requirements import Requirement

        return Requirement
    except ImportError:
        pass
    try:
        from pip._vendor.packaging.requirements import Requirement as PipRequirement

        return PipRequirement
    except ImportError:
        return None


Requirement = load_requirement()


def dep_name(text: str) -> str | None:
    """The required distribution's canonical name, or None when its marker says it does not apply."""
    if Requirement is not None:
        try:
            req = Requirement(text)
        except Exception:
            return None
        try:
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                return None
        except Exception:
            pass  # a marker this packaging cannot evaluate: keep the edge
        return canon(req.name)
    name = re.split(r"[\s;<>=!~\[(@]", text.strip(), maxsplit=1)[0]
    return canon(name) if name else None


requires: dict[str, list[str]] = {}
for dist in metadata.distributions():
    name = dist.metadata["Name"]
    if not name or canon(name) in requires:  # a shadowed copy: the first one wins, as for imports
        continue
    deps = {d for d in (dep_name(t) for t in dist.requires or []) if d}
    requires[canon(name)] = sorted(deps)

emit({"requires": dict(sorted(requires.items()))})
