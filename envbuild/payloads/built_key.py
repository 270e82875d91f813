"""The builder stage's cache of built wheels (``[python] build_from_source``, issue 27 item 2).

``envbuild lock`` copies this file into the bundle as ``envbuild-source-build.py``; the builder stage
runs it with the venv's Python (3.9 or newer, standard library only) around ``pip wheel``:

- ``reuse``: for each sdist of ``requirements-source.txt``, computes its key (the sdist's sha256, the
  installed torch's version with its variant, the arch-list variables, the Python version, the
  compilers' versions) and looks for a wheel in the cache folder (``built-wheels/``) whose key
  record (``<wheel>.envbuild-key.json``) has that key, whose bytes have the record's sha256, and which
  is a wheel of that sdist's distribution and version (its file name and its ``.dist-info/METADATA``:
  a key record is a file anyone can copy, issue 36).  A hit is copied to the build folder; the rest
  are written to the requirements file ``pip wheel`` builds.
- ``record``: writes the key record beside each wheel just built.

``envbuild build`` exports the build folder (wheels and records) to the bundle's ``built-wheels/``
after the build, so the next build with the same key copies the wheel in instead of compiling.  The
cache cannot vouch for itself: the record beside a wheel binds it to the sdist's sha256, but anyone who
can write the folder can write the record too.  So ``envbuild build`` puts a kept wheel into the build
context only when the build record of the build that made it (``BUNDLE/build-<tag>.record.json``,
outside the cache folder) names its sha256 (:func:`envbuild.image.built_cache.verify_built`); this
script's checks of the name and version are what a plain ``docker build`` of the bundle still gets.

A module of the base (issue 38), not beside the other bundle payload (``validate/probes/_probe_ops.py``,
copied as ``envbuild-probe-ops.py``): the probes import that one as a sibling in the probe process, and
this one is imported by ``lock/source_files.py`` (which copies it) and ``image/built_cache.py`` (which
reads its records), both below ``validate/`` in the layers (docs/architecture.md).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from email.parser import HeaderParser
from importlib import metadata
from pathlib import Path
from typing import Any

FORMAT = "envbuild.built-wheel/1"
RECORD_SUFFIX = ".envbuild-key.json"
SCRIPT_NAME = "envbuild-source-build.py"  # its name in the bundle
# The variables the Dockerfile sets on the build's RUN line that change the compiled code.
ARCH_VARIABLES = ("TORCH_CUDA_ARCH_LIST", "PYTORCH_ROCM_ARCH", "FLASH_ATTN_CUDA_ARCHS")
# (tool, line of its --version output kept, where it is when not on PATH)
COMPILERS = (
    ("c++", 0, ()),
    ("nvcc", -1, ("/usr/local/cuda/bin/nvcc",)),
    ("hipcc", 0, ("/opt/rocm/bin/hipcc",)),
)
_PLAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
PREFIX = "envbuild-source-build:"


def canonical(name: str) -> str:
    """PEP 503 name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_requirements(text: str) -> tuple[list[str], list[dict[str, Any]]]:
    """(option lines, requirements) of a hash-pinned file as ``envbuild lock`` writes it: each
    requirement ``{"name", "version", "sha256": [...], "line"}``."""
    options: list[str] = []
    found: list[dict[str, Any]] = []
    for raw in text.replace("\\\n", " ").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):
            options.append(line)
            continue
        spec, *rest = line.split()
        name, _, version = spec.partition("==")
        hashes = sorted(h.split("sha256:", 1)[1] for h in rest if h.startswith("--hash=sha256:"))
        found.append(
            {"name": canonical(name), "version": version, "sha256": hashes, "line": " ".join([spec, *rest])}
        )
    return options, found


def compiler_versions() -> list[str]:
    """``tool: version line`` for each compiler present (g++, nvcc, hipcc)."""
    versions = []
    for tool, index, fallbacks in COMPILERS:
        path = shutil.which(tool) or next((p for p in fallbacks if os.access(p, os.X_OK)), None)
        if path is None:
            continue
        proc = subprocess.run([path, "--version"], capture_output=True, text=True, check=False)
        lines = [line.strip() for line in proc.stdout.splitlines() if line.strip()]
        if lines:
            versions.append(f"{tool}: {lines[index]}")
    return versions


def torch_version() -> str | None:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def build_key(requirement: dict[str, Any], compilers: list[str]) -> dict[str, Any]:
    """What the built wheel depends on; equal keys give an interchangeable wheel."""
    return {
        "name": requirement["name"],
        "version": requirement["version"],
        "sdist_sha256": requirement["sha256"],
        "torch": torch_version(),
        "arch_list": {v: os.environ[v] for v in ARCH_VARIABLES if os.environ.get(v)},
        "python": "{}.{}".format(*sys.version_info[:2]),
        "compilers": compilers,
    }


def read_record(path: Path) -> dict[str, Any] | None:
    """A key record, or None when it is not one (unreadable, another format, a wheel name with a path)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        return None
    wheel = record.get("wheel")
    if not isinstance(wheel, str) or not _PLAIN.match(wheel) or not wheel.endswith(".whl"):
        return None
    if not isinstance(record.get("wheel_sha256"), str) or not isinstance(record.get("key"), dict):
        return None
    return record


def normal_version(version: str) -> str:
    """A version as file names and METADATA write it, for comparing (``1.0`` and ``1.0``; not PEP 440)."""
    return version.strip().lower().lstrip("v")


def wheel_identity(wheel: Path) -> tuple[str, str]:
    """(name, version) a wheel's file name gives (``name-version(-build)?-py-abi-platform.whl``)."""
    parts = wheel.name[: -len(".whl")].split("-") if wheel.name.endswith(".whl") else []
    if len(parts) not in (5, 6):
        return "?", "?"
    return canonical(parts[0]), normal_version(parts[1])


def metadata_identity(wheel: Path) -> tuple[str, str]:
    """(Name, Version) of the wheel's one top-level ``*.dist-info/METADATA``; ("?", "?") when it has
    none, or several, or is not a zip."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            found = [n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
            if len(found) != 1:
                return "?", "?"
            text = archive.read(found[0]).decode("utf-8", "replace")
    except (OSError, zipfile.BadZipFile, KeyError, ValueError):
        return "?", "?"
    headers = HeaderParser().parsestr(text)
    return canonical(str(headers.get("Name") or "?")), normal_version(str(headers.get("Version") or "?"))


def identity_mismatch(
    wheel: Path, name: str, version: str, same_version: Callable[[str, str], bool] | None = None
) -> str | None:
    """Why ``wheel`` is not a wheel of ``name`` ``version`` (its file name, its METADATA), or None.
    ``same_version``: how versions compare (envbuild passes PEP 440's; here, as written, lowercased)."""
    same = same_version or (lambda a, b: normal_version(a) == normal_version(b))
    wanted = canonical(name)
    for where, (got, got_version) in (
        ("its file name", wheel_identity(wheel)),
        ("its METADATA", metadata_identity(wheel)),
    ):
        if got != wanted or not same(got_version, version):
            return f"{where} says {got}=={got_version}, not {wanted}=={version}"
    return None


def reuse(cache: Path, built: Path, source: Path, todo: Path) -> int:
    """Copy each cached wheel whose key matches into ``built``; write the rest to ``todo``."""
    options, wanted = read_requirements(source.read_text(encoding="utf-8"))
    records = [r for p in sorted(cache.glob("*" + RECORD_SUFFIX)) if (r := read_record(p)) is not None]
    compilers = compiler_versions()
    built.mkdir(parents=True, exist_ok=True)
    remaining = []
    for requirement in wanted:
        key = build_key(requirement, compilers)
        spec = f"{requirement['name']}=={requirement['version']}"
        hit = None
        for record in records:
            if record["key"] != key:
                continue
            wheel = cache / record["wheel"]
            if not wheel.is_file() or sha256_of(wheel) != record["wheel_sha256"]:
                print(f"{PREFIX} {wheel} does not match its key record (sha256): not used", flush=True)
                continue
            why = identity_mismatch(wheel, requirement["name"], requirement["version"])
            if why is not None:  # a key copied beside another distribution's wheel
                print(f"{PREFIX} {wheel} has the key of {spec}, but {why}: not used", flush=True)
                continue
            hit = record
            break
        if hit is None:
            print(f"{PREFIX} building {spec}: no cached wheel with its key", flush=True)
            remaining.append(requirement["line"])
            continue
        shutil.copyfile(cache / hit["wheel"], built / hit["wheel"])
        (built / (hit["wheel"] + RECORD_SUFFIX)).write_text(json.dumps(hit, indent=2, sort_keys=True) + "\n")
        print(f"{PREFIX} cached {spec}: {hit['wheel']} has the same key, not built again", flush=True)
    todo.write_text("\n".join([*options, *remaining]) + "\n", encoding="utf-8")
    return 0


def record(built: Path, source: Path) -> int:
    """Write the key record beside each wheel in ``built`` that has none (the wheels just built)."""
    _, wanted = read_requirements(source.read_text(encoding="utf-8"))
    by_name = {r["name"]: r for r in wanted}
    compilers = compiler_versions()
    for wheel in sorted(built.glob("*.whl")):
        path = built / (wheel.name + RECORD_SUFFIX)
        requirement = by_name.get(canonical(wheel.name.split("-", 1)[0]))
        if path.exists() or requirement is None:
            continue
        body = {
            "format": FORMAT,
            "wheel": wheel.name,
            "wheel_sha256": sha256_of(wheel),
            "key": build_key(requirement, compilers),
        }
        path.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=SCRIPT_NAME, description="the builder's cache of built wheels")
    parser.add_argument("action", choices=("reuse", "record"))
    parser.add_argument("--cache", type=Path, default=Path("/tmp/envbuild/built-wheels"))
    parser.add_argument("--built", type=Path, default=Path("/tmp/envbuild/built"))
    parser.add_argument("--source", type=Path, default=Path("/tmp/envbuild/requirements-source.txt"))
    parser.add_argument("--todo", type=Path, default=Path("/tmp/envbuild/requirements-to-build.txt"))
    args = parser.parse_args(argv)
    if args.action == "reuse":
        return reuse(args.cache, args.built, args.source, args.todo)
    return record(args.built, args.source)


if __name__ == "__main__":
    sys.exit(main())
