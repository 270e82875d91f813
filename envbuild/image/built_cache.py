"""Built wheels kept between builds (``[python] build_from_source``, issue 27 item 2).

After a build, :func:`export_built` copies the builder stage's ``/tmp/envbuild/built`` (the wheels and
their key records, :mod:`envbuild.payloads.built_key`) to the bundle's ``built-wheels/``.  The classic
builder has no ``--output``, and building ``--target builder`` again would send the whole context (GBs of CUDA
wheels) a second time: the builder stage's last image is already in the engine (the classic builder
keeps each step's image as the layer cache), so a container is created from it and the folder read
with ``get_archive`` (``docker cp``).  The next build's context carries ``built-wheels/``, and the
builder stage copies a wheel whose key matches instead of compiling it.  The folder is not under
``wheelhouse/``: the builder copies that before the venv's install, and a wheel kept there would make
the next build install the whole venv again.

:func:`verify_built` is the wheelhouse check's part for that folder.  The folder cannot vouch for itself
(issue 36): anyone who can write it can put any wheel there with a key record copied from a real one
and that wheel's own sha256.  So a kept wheel goes into the build context only when

- its key record is there and names its sha256 (a wheel changed after the export is refused);
- it is a wheel of the distribution and version of the lock's ``source`` entry whose sdist its key
  names (file name and ``.dist-info/METADATA``; another distribution is refused, naming both);
- the build record of the build that made it (``BUNDLE/build-<tag>.record.json``, outside the folder:
  ``outputs.built_wheels``, from that build's log) names its file and sha256.  A sha256 no record
  names, for a file a record names, is refused; a wheel no record names (a build with ``--no-record``
  or ``--record`` elsewhere, a folder restored from a CI cache without its record) is left out of the
  context and compiled again, and the build says so.
"""

from __future__ import annotations

import re
import shutil
import tarfile
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from packaging.version import InvalidVersion, Version

from envbuild import atomic
from envbuild.digest import sha256_file
from envbuild.errors import BuildError, BundleError
from envbuild.image.progress import Step
from envbuild.image.record import recorded_built_wheels
from envbuild.models import Lock
from envbuild.payloads.built_key import RECORD_SUFFIX, identity_mismatch, read_record

BUILT = "built-wheels"  # in the bundle; render writes built-wheels/.keep for a source build
IN_BUILDER = "/tmp/envbuild/built"  # templates/dockerfiles/Dockerfile.j2, the source-build step
_STAGE = re.compile(r"^FROM\s+\S+\s+AS\s+builder\s*$", re.IGNORECASE)
_IMAGE_LINE = re.compile(r"^\s*---> (?:sha256:)?([0-9a-f]{12,64})\s*$")
_PLAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


def builder_stage_image(steps: Sequence[Step]) -> str | None:
    """The image of the builder stage's last step, from the classic builder's ``---> ID`` lines."""
    start = next((i for i, s in enumerate(steps) if _STAGE.match(s.instruction)), None)
    if start is None:
        return None
    end = next(
        (i for i in range(start + 1, len(steps)) if steps[i].instruction.upper().startswith("FROM ")), None
    )
    last = steps[(end if end is not None else len(steps)) - 1]
    ids = [m.group(1) for line in last.lines if (m := _IMAGE_LINE.match(line))]
    return ids[-1] if ids else None


@dataclass(frozen=True)
class BuiltCheck:
    """What :func:`verify_built` found in ``built-wheels/``."""

    usable: int  # wheels whose key names an sdist of the lock, vouched for by a build record
    sha256: dict[str, str]  # context path (built-wheels/NAME.whl) -> the sha256 the build record names
    left_out: tuple[str, ...]  # context paths kept out of the build context (wheels and their records)
    notes: tuple[str, ...]  # one line per wheel left out, saying why


def recorded_wheels(bundle: Path) -> dict[str, dict[str, str]]:
    """wheel file -> {sha256: the build record naming it}, from each ``build-*.record.json`` of ``bundle``."""
    out: dict[str, dict[str, str]] = {}
    for path in sorted(bundle.glob("build-*.record.json")):
        for row in recorded_built_wheels(path):
            out.setdefault(row["file"], {}).setdefault(row["sha256"], path.name)
    return out


def verify_built(lock: Lock, bundle: Path) -> BuiltCheck:
    """Check ``bundle/built-wheels/`` (see the module's docstring); raise :class:`BuildError` for a wheel
    that is refused, and return which wheels go into the build context."""
    folder = bundle / BUILT
    if not folder.is_dir():
        return BuiltCheck(0, {}, (), ())
    sources = {f.sha256: d for d in lock.distributions if d.role == "source" for f in d.files}
    fix = f"delete {folder} (the next build compiles again and exports it anew)"
    recorded = recorded_wheels(bundle)
    usable = 0
    sha256: dict[str, str] = {}
    left_out: list[str] = []
    notes: list[str] = []
    for wheel in sorted(folder.glob("*.whl")):
        path = folder / (wheel.name + RECORD_SUFFIX)
        record = read_record(path)
        if record is None or record["wheel"] != wheel.name:
            raise BundleError(f"{wheel}: no key record beside it ({path.name} missing or not one); {fix}")
        got = sha256_file(wheel)
        if got != record["wheel_sha256"]:
            raise BuildError(
                f"{wheel}: sha256 {got}, its key record {path.name} says {record['wheel_sha256']} (changed "
                f"after the build that exported it); {fix}; nothing was built"
            )
        source = next((sources[s] for s in record["key"].get("sdist_sha256") or () if s in sources), None)
        if source is not None:
            why = identity_mismatch(wheel, source.name, source.version, same_version=_same_version)
            if why is not None:
                raise BuildError(
                    f"{wheel}: its key record {path.name} names the sdist of {source.name}=={source.version} "
                    f"(the lock's source entry), but {why}: not a wheel built from it; {fix}; nothing was "
                    "built"
                )
        seen = recorded.get(wheel.name, {})
        if seen and got not in seen:
            named = ", ".join(f"{sha} ({where})" for sha, where in sorted(seen.items()))
            raise BuildError(
                f"{wheel}: sha256 {got}, but the build record of the build that made it says {named}: "
                f"not the wheel that build exported; {fix}; nothing was built"
            )
        rel = f"{BUILT}/{wheel.name}"
        if not seen:
            left_out += [rel, f"{rel}{RECORD_SUFFIX}"]
            notes.append(
                f"{wheel}: no build record in {bundle} (build-*.record.json) names it, so it is not used "
                "(compiled again): the folder cannot vouch for its own wheels"
            )
            continue
        sha256[rel] = got
        usable += source is not None
    return BuiltCheck(usable, sha256, tuple(left_out), tuple(notes))


def _same_version(a: str, b: str) -> bool:
    """PEP 440 equality (``1.0`` is ``1.0.0``); text that is no version compares as written."""
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def export_built(api: Any, image: str, bundle: Path) -> list[str]:
    """Copy the wheels and key records of the builder stage ``image`` to ``bundle/built-wheels/``; return the
    wheels' names.  A file already there is replaced (the same key gives the same wheel)."""
    folder = bundle / BUILT
    folder.mkdir(parents=True, exist_ok=True)
    wheels = []
    with tempfile.TemporaryFile(dir=folder) as spool:
        container = api.create_container(image, command=["true"])
        try:
            stream, _stat = api.get_archive(container, IN_BUILDER)
            for chunk in stream:
                spool.write(chunk)
        finally:
            api.remove_container(container, force=True)
        spool.seek(0)
        wheels = _unpack(spool, folder)
    if not wheels:
        raise BuildError(f"the builder stage ({image[:19]}) holds no built wheel in {IN_BUILDER}")
    return wheels


def _unpack(spool: IO[bytes], folder: Path) -> list[str]:
    """The wheels and key records of a ``built/`` tar into ``folder``, each written whole then renamed."""
    wheels = []
    with tarfile.open(fileobj=spool) as archive:
        for member in archive.getmembers():
            name = member.name.rsplit("/", 1)[-1]
            if not member.isfile() or member.name != f"built/{name}" or not _PLAIN.match(name):
                continue
            if not name.endswith((".whl", RECORD_SUFFIX)):
                continue
            source = archive.extractfile(member)
            assert source is not None  # a regular file
            with atomic.writing(folder / name, mode=0o600) as out:  # mode: as tempfile.mkstemp made it
                shutil.copyfileobj(source, out)
            if name.endswith(".whl"):
                wheels.append(name)
    return sorted(wheels)
