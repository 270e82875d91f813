"""The builder stage's cache of built wheels (``[python] build_from_source``, issue 27 item 2).

``envbuild lock`` copies this file into the bundle as ``envbuild-source-build.py``; the builder stage
runs it with the venv's Python (3.9 or newer, standard library only) around ``pip wheel``:

- ``reuse``: for each sdist of ``requirements-source.txt``, computes its key (the sdist's sha256, the
  installed torch's version with its variant, the arch-list variables, the Python version, the
  compilers' versions) and looks for a wheel in the cache folder (``built-wheels/``) whose key
  record (``<wheel>.envbuild-key.json``) has that key and whose bytes have the record's sha256.  A hit
  is copied to the build folder; the rest are written to the requirements file ``pip wheel`` builds.
- ``record``: writes the key record beside each wheel just built.

``envbuild build`` exports the build folder (wheels and records) to the bundle's ``built-wheels/``
after the build, so the next build with the same key copies the wheel in instead of compiling.  A cached wheel
is trusted as the output of an earlier build of the same bundle; the lock cannot hash it (it exists
only after a build), so the record binds it to the sdist's sha256 and the build record names its
sha256.
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
            if wheel.is_file() and sha256_of(wheel) == record["wheel_sha256"]:
                hit = record
                break
            print(f"{PREFIX} {wheel} does not match its key record (sha256): not used", flush=True)
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
