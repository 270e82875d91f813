"""The interpreter under test, seen from outside it: where the lock is, which interpreter is validated,
which folder the checks run in, and how they find ``python``.

Two situations are served the same way:

- **inside the image** built from a bundle: the lock is at ``/etc/envbuild/envbuild.lock.json``, the
  interpreter is the lock's ``/opt/venv/bin/python`` and the checks run in the lock's workdir;
- **on a machine the provider prepared** (a venv rebuilt from ``requirements-rebuild.txt``, a conda
  environment, a system Python): ``--lock BUNDLE`` names the bundle folder, ``--python`` the
  interpreter, and the checks run in ``--workdir``, by default the bundle's ``app/``.

Either way the checks run with the interpreter under test: its ``bin`` folder first on ``PATH`` and a
bare ``python`` / ``python3`` / ``pythonX.Y`` as argv[0] replaced by its path.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from envbuild.errors import UsageError
from envbuild.models import LOCK_PATH_IN_IMAGE, Lock

LOCK_NAME = "envbuild.lock.json"
DEFAULT_LOCK = Path(LOCK_PATH_IN_IMAGE)
_BARE_PYTHON = re.compile(r"python(3(\.\d+)?)?")


@dataclass(frozen=True)
class LockLocation:
    """The lock file to read and, when it sits in a bundle folder, that folder."""

    path: Path
    bundle: Path | None


def lock_search_path(cwd: Path | None = None) -> list[Path]:
    """Where ``envbuild validate`` looks for a lock when ``--lock`` is not given, in order."""
    here = Path.cwd() if cwd is None else cwd
    return [DEFAULT_LOCK, here / LOCK_NAME]


def is_bundle(folder: Path) -> bool:
    """A folder ``envbuild render`` wrote: the lock next to ``requirements-rebuild.txt``."""
    return (folder / LOCK_NAME).is_file() and (folder / "requirements-rebuild.txt").is_file()


def find_lock(explicit: Path | None, cwd: Path | None = None) -> LockLocation:
    """``--lock FILE``, ``--lock BUNDLE`` (its ``envbuild.lock.json``), else the first of
    :func:`lock_search_path` that exists.  Raises :class:`UsageError` saying where it looked."""
    if explicit is not None:
        if explicit.is_dir():
            path = explicit / LOCK_NAME
            if not path.is_file():
                raise UsageError(
                    f"--lock {explicit}: a folder without {LOCK_NAME}; pass a bundle folder "
                    f"(written by `envbuild render`) or the lock file itself"
                )
            return LockLocation(path, explicit)
        # A file: read_lock says clearly when it is missing or not a lock.
        return LockLocation(explicit, explicit.parent if is_bundle(explicit.parent) else None)
    searched = lock_search_path(cwd)
    for path in searched:
        if path.is_file():
            return LockLocation(path, path.parent if is_bundle(path.parent) else None)
    looked = ", ".join(str(p) for p in searched)
    raise UsageError(
        f"no lock found: looked for {looked} (inside the image built from a bundle the lock is at "
        f"{DEFAULT_LOCK}); pass the bundle folder with `--lock BUNDLE`, or a lock file with "
        f"`--lock path/to/{LOCK_NAME}`"
    )


def default_workdir(lock: Lock, bundle: Path | None) -> Path:
    """Where the checks and the checkpoint run when ``--workdir`` is not given.

    A lock read from a bundle folder means "outside the image": the bundle's ``app/`` is what the
    image copies into its workdir.  Otherwise the lock's workdir when it exists here, else ``.``.
    """
    if bundle is not None and (bundle / "app").is_dir():
        return bundle / "app"
    if Path(lock.workdir).is_dir():
        return Path(lock.workdir)
    return Path.cwd()


# How the interpreter under test was chosen (recorded in the interpreter stage's facts).
SOURCE_OPTION = "--python"
SOURCE_LOCK = "the lock's python_executable"
SOURCE_ACTIVE = "the active environment"
SOURCE_SELF = "envbuild's own interpreter"


def _executable(path: str) -> bool:
    return Path(path).is_file() and os.access(path, os.X_OK)


def choose_python(explicit: str | None, lock: Lock, env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The interpreter under test and how it was chosen.

    ``--python`` (a path, or a name looked up on PATH), else the lock's interpreter when it exists
    here (inside the image), else the activated venv or conda environment (``VIRTUAL_ENV``,
    ``CONDA_PREFIX``), else the interpreter envbuild itself runs in.  The path is made absolute but
    not resolved: a venv's ``bin/python`` is a link to its base interpreter, and resolving it would
    leave the venv.
    """
    source = os.environ if env is None else env
    if explicit:
        found = explicit if os.sep in explicit else shutil.which(explicit, path=source.get("PATH"))
        if not found or not _executable(found):
            raise UsageError(f"--python {explicit}: no executable interpreter at that path or on PATH")
        return os.path.abspath(found), SOURCE_OPTION
    if _executable(lock.python_executable):
        return lock.python_executable, SOURCE_LOCK
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        prefix = source.get(var)
        if prefix and _executable(os.path.join(prefix, "bin", "python")):
            return os.path.abspath(os.path.join(prefix, "bin", "python")), f"{SOURCE_ACTIVE} (${var})"
    return sys.executable, SOURCE_SELF


def check_env(python: str, env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with the interpreter's ``bin`` folder first on PATH (once)."""
    bin_dir = os.path.dirname(os.path.abspath(python))
    rest = [p for p in env.get("PATH", os.defpath).split(os.pathsep) if p and p != bin_dir]
    return {**env, "PATH": os.pathsep.join([bin_dir, *rest])}


def check_argv(argv: Sequence[str], python: str) -> tuple[str, ...]:
    """``argv`` with a bare ``python``, ``python3`` or ``python3.N`` as argv[0] replaced by ``python``."""
    if argv and _BARE_PYTHON.fullmatch(argv[0]):
        return (python, *argv[1:])
    return tuple(argv)
