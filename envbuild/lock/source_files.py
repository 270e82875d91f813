"""The bundle's files for ``[python] build_from_source``, written by ``envbuild lock`` beside
``requirements-rebuild.txt`` (which holds only the wheels the image installs):

- ``requirements-source.txt``: the sdists to build, each pinned to its sha256; the builder stage runs
  ``pip wheel --no-build-isolation --no-deps --require-hashes`` on it, after the locked torch is in the venv;
- ``requirements-build.txt``: their build dependencies that the image does not install (setuptools,
  ninja, ...), each pinned to its sha256; installed with ``pip install --target`` beside the build, so
  they never reach the image;
- ``envbuild-source-build.py`` (:mod:`envbuild.payloads.built_key`, copied): the builder stage's cache of
  built wheels, which reuses a wheel an earlier build kept in ``built-wheels/`` with the same key.

They exist only when the lock has source builds; their bytes depend on the lock only.  So does

- ``requirements-toolkit.txt`` (CUDA 13, :mod:`envbuild.lock.toolkit`): CUDA's compiler wheels
  (``role = "toolkit"``), each pinned to its sha256; the builder stage installs them with ``pip install
  --no-deps --require-hashes --target`` into its own prefix, never into the venv.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from envbuild.lock.urls import index_options
from envbuild.models import Lock, LockedDistribution
from envbuild.payloads import built_key
from envbuild.payloads.built_key import SCRIPT_NAME
from envbuild.render.quote import comment
from envbuild.render.source_build import TOOLKIT_REQUIREMENTS

SOURCE_REQUIREMENTS = "requirements-source.txt"
BUILD_REQUIREMENTS = "requirements-build.txt"


def _lines(lock: Lock, role: str, what: str, why: str = "[python] build_from_source") -> Iterator[str]:
    res = lock.resolution
    assert res is not None
    yield f"# {what}, locked by envbuild {lock.envbuild_version} with {res.resolver}. Do not edit:"
    yield "#   regenerate with `envbuild lock BUNDLE` (see the bundle README)."
    yield f"# profile: {comment(lock.profile_name, 'name')}; {why}"
    yield ""
    yield "--require-hashes"
    if role == "toolkit":
        yield "--only-binary :all:"
    yield from index_options(res)
    for dist in lock.distributions:
        if dist.role != role:
            continue
        yield ""
        yield f"{dist.spec} \\"
        hashes = dist.hashes
        for j, value in enumerate(hashes):
            yield f"    --hash={value}" + (" \\" if j < len(hashes) - 1 else "")


def source_files(lock: Lock) -> dict[str, bytes]:
    """``{file name: bytes}`` of the builder stage's files: the three of a source build, and the toolkit's
    (``{}`` when the lock builds nothing from source and locks no toolkit)."""
    roles = {d.role for d in lock.distributions}
    files: dict[str, Iterator[str]] = {}
    if "source" in roles:
        files[SOURCE_REQUIREMENTS] = _lines(lock, "source", "The sdists the builder stage builds into wheels")
        files[BUILD_REQUIREMENTS] = _lines(lock, "build", "What building them needs, beside the build only")
    if "toolkit" in roles:
        files[TOOLKIT_REQUIREMENTS] = _lines(
            lock,
            "toolkit",
            "CUDA's compiler, installed into the builder stage's own prefix only",
            "the builder stage's nvcc (CUDA 13), at the release the locked torch requires",
        )
    written = {name: ("\n".join(lines) + "\n").encode("utf-8") for name, lines in files.items()}
    if "source" in roles:
        written[SCRIPT_NAME] = Path(built_key.__file__).read_bytes()
    return written


def installed(dists: tuple[LockedDistribution, ...]) -> tuple[LockedDistribution, ...]:
    """The distributions ``requirements-rebuild.txt`` installs (wheels, not sdists or build-only)."""
    return tuple(d for d in dists if d.role == "install")
