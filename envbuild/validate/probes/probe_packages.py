# mypy: disable-error-code="import-not-found,no-untyped-call"
"""Probe: installed distributions, what each requires, and the broken requirements (``pip check``).

Requirement parsing uses ``packaging`` from the environment under test, or the copy pip vendors; when
neither exists, requirements are checked by name only (``check_mode`` says which).
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path
from typing import Any

from _probe_common import emit, read_args

read_args()


def canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def load_packaging() -> tuple[Any, Any, Any, str]:
    try:
        from packaging.requirements import Requirement
        from packaging.version import InvalidVersion, Version

        return Requirement, Version, InvalidVersion, "packaging"
    except ImportError:
        pass
    try:
        from pip._vendor.packaging.requirements import Requirement as PipRequirement
        from pip._vendor.packaging.version import InvalidVersion as PipInvalidVersion
        from pip._vendor.packaging.version import Version as PipVersion

        return PipRequirement, PipVersion, PipInvalidVersion, "pip-vendored-packaging"
    except ImportError:
        return None, None, Exception, "names-only"


Requirement, Version, InvalidVersion, check_mode = load_packaging()

dists: dict[str, dict[str, Any]] = {}
for dist in metadata.distributions():
    name = dist.metadata["Name"]
    if not name:
        continue
    key = canon(name)
    if key in dists:  # shadowed copy further down sys.path: the first one wins, as for imports
        dists[key].setdefault("shadowed", []).append(dist.version)
        continue
    dists[key] = {"name": name, "version": dist.version, "requires": list(dist.requires or [])}

broken: list[str] = []
# Which installed distributions each one requires (canonical names; markers that do not apply skipped):
# the packages stage tells a broken distribution the lock needs from one it does not.
requires: dict[str, set[str]] = {}
for key, info in sorted(dists.items()):
    needs = requires.setdefault(key, set())
    for text in info["requires"]:
        if Requirement is None:
            dep_name = canon(re.split(r"[\s;<>=!~\[(@]", text.strip(), maxsplit=1)[0])
            if ";" not in text:
                needs.add(dep_name)
            if ";" not in text and dep_name not in dists:
                broken.append(f"{info['name']} {info['version']} requires {text}, which is not installed")
            continue
        try:
            req = Requirement(text)
        except Exception:
            broken.append(f"{info['name']} {info['version']} has an unparseable requirement {text!r}")
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        needs.add(canon(req.name))
        dep = dists.get(canon(req.name))
        if dep is None:
            broken.append(f"{info['name']} {info['version']} requires {req.name}, which is not installed")
            continue
        try:
            ok = req.specifier.contains(Version(dep["version"]), prereleases=True)
        except InvalidVersion:
            ok = False
        if not ok:
            broken.append(
                f"{info['name']} {info['version']} has requirement {text.split(';')[0].strip()}, "
                f"but you have {dep['name']} {dep['version']}"
            )

# The build each torch-family distribution says it is.  The package index's default torch build carries
# no local tag in its metadata (torch 2.11.0 from PyPI installs as "2.11.0"), but its version.py does
# ("2.11.0+cu130"): the packages stage reads the variant from there when the metadata has none.
BUILD_FILES = {
    "torch": "torch/version.py",
    "torchvision": "torchvision/version.py",
    "torchaudio": "torchaudio/version.py",
}
# A version's own characters only (PEP 440 with a local tag): the file is the machine's, never echoed whole.
VERSION_LINE = re.compile(r"""^__version__\s*=\s*['"]([0-9A-Za-z.+!_-]{1,64})['"]""", re.M)
builds: dict[str, str] = {}
for key, relative in BUILD_FILES.items():
    if key not in dists:
        continue
    try:
        found = VERSION_LINE.search(
            Path(str(metadata.distribution(key).locate_file(relative))).read_text(encoding="utf-8")
        )
    except (OSError, UnicodeDecodeError, metadata.PackageNotFoundError):
        continue
    if found:
        builds[key] = found.group(1)

emit(
    {
        "installed": {k: v["version"] for k, v in sorted(dists.items())},
        "builds": builds,
        "names": {k: v["name"] for k, v in sorted(dists.items())},
        "shadowed": {k: v["shadowed"] for k, v in dists.items() if "shadowed" in v},
        "broken": broken,
        "requires": {k: sorted(v) for k, v in sorted(requires.items())},
        "check_mode": check_mode,
    }
)
