"""Built wheels kept between builds (``[python] build_from_source``, issue 27 item 2).

After a build, :func:`export_built` copies the builder stage's ``/tmp/envbuild/built`` (the wheels and
their key records, :mod:`envbuild.built_key`) to the bundle's ``built-wheels/``.  The classic builder has
no ``--output``, and building ``--target builder`` again would send the whole context (GBs of CUDA
wheels) a second time: the builder stage's last image is already in the engine (the classic builder
keeps each step's image as the layer cache), so a container is created from it and the folder read
with ``get_archive`` (``docker cp``).  The next build's context carries ``built-wheels/``, and the
builder stage copies a wheel whose key matches instead of compiling it.  The folder is not under
``wheelhouse/``: the builder copies that before the venv's install, and a wheel kept there would make
the next build install the whole venv again.

:func:`verify_built` is the wheelhouse check's part for that folder: each wheel has its key record and
the record's sha256 (the lock cannot hash a built wheel).
"""

from __future__ import annotations

import re
import shutil
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from envbuild import atomic
from envbuild.built_key import RECORD_SUFFIX, read_record
from envbuild.digest import sha256_file
from envbuild.errors import BuildError, BundleError
from envbuild.image.progress import Step
from envbuild.models import Lock

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


def verify_built(lock: Lock, bundle: Path) -> int:
    """Check ``bundle/built-wheels/``: every wheel has its key record, and the record's sha256.  Returns the
    number of wheels whose record names an sdist of the lock (the others are kept, and not used)."""
    folder = bundle / BUILT
    if not folder.is_dir():
        return 0
    sdists = {f.sha256 for d in lock.distributions if d.role == "source" for f in d.files}
    fix = f"delete {folder} (the next build compiles again and exports it anew)"
    usable = 0
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
        usable += bool(sdists & set(record["key"].get("sdist_sha256") or ()))
    return usable


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
