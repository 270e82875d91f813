"""A per-user cache of validated catalog files, so a cold start does not parse and validate them again.

Each data file validated into a model is stored once, pickled, under ``catalog/`` in envbuild's
cache folder (:func:`envbuild.resources.cache_dir`: ``$XDG_CACHE_HOME/envbuild``, else
``~/.cache/envbuild``), in one slot per file name and model.  The slot starts with a key: the sha256 of

- the data file's bytes,
- the model's identity and definition: its qualified name and the bytes of the modules that define
  it and its rows (fields, checks): its own module, the catalog's row modules
  (``envbuild/catalog/rows.py`` and ``envbuild/catalog/*_rows.py``), ``envbuild/models/profile.py`` and
  ``envbuild/models/cards.py`` (the shared literal types and cards) and ``envbuild/boundary.py`` (how
  data is validated),
- envbuild's and Python's versions and the pickle protocol.

The slot holds plain dataclasses: reading it imports no validation library (:mod:`envbuild.boundary`
imports pydantic only to validate), and the validator's version does not enter the key (what it
accepts is fixed by the models' source).

A slot is read only when its key is the one computed for the file being loaded; anything else
(missing, another key, truncated, not a pickle, not an instance of the model, not owned by this
user or writable by others) is a miss, and the caller validates the file in full and stores the
result again.  Writing is atomic (a temporary file renamed into place) and never fails a load: a
cache folder that cannot be written only costs the next start its time.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import sys
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from envbuild.resources import cache_dir

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

M = TypeVar("M", bound="DataclassInstance")

FORMAT = b"envbuild-catalog-cache/1\n"
PROTOCOL = pickle.HIGHEST_PROTOCOL


def catalog_cache_dir() -> Path:
    return cache_dir() / "catalog"


@cache
def _module_digest(name: str) -> bytes:
    """sha256 of the file a module was loaded from (its source in a checkout or a wheel)."""
    module = sys.modules.get(name)
    filename = getattr(module, "__file__", None)
    try:
        data = Path(filename).read_bytes() if filename else f"<no file: {name}>".encode()
    except OSError:
        data = f"<unreadable: {filename}>".encode()
    return hashlib.sha256(data).digest()


# The modules every catalog model depends on, besides its own.
MODEL_MODULES = (
    "envbuild.catalog.rows",
    "envbuild.catalog.card_rows",
    "envbuild.catalog.torch_rows",
    "envbuild.catalog.toolkit_rows",
    "envbuild.catalog.platform_rows",
    "envbuild.catalog.blender_rows",
    "envbuild.catalog.perf_rows",
    "envbuild.models.profile",
    "envbuild.models.cards",
    "envbuild.boundary",
)


@cache
def schema_fingerprint(model: type[Any]) -> bytes:
    """What the validated form of a file depends on besides the file: see the module docstring."""
    from envbuild import __version__

    digest = hashlib.sha256()
    for part in (FORMAT, __version__.encode(), sys.version.encode(), str(PROTOCOL).encode()):
        digest.update(part + b"\0")
    digest.update(f"{model.__module__}.{model.__qualname__}\0".encode())
    for name in sorted({model.__module__, *MODEL_MODULES}):
        digest.update(name.encode() + b"\0" + _module_digest(name))
    return digest.digest()


def cache_key(data: bytes, model: type[Any]) -> bytes:
    """The key a slot must carry to stand for ``data`` validated as ``model`` (64 hex digits)."""
    digest = hashlib.sha256(schema_fingerprint(model))  # type: ignore[arg-type]  # a class is hashable
    digest.update(hashlib.sha256(data).digest())
    return digest.hexdigest().encode("ascii")


def slot(path: Path, model: type[DataclassInstance]) -> Path:
    """The one cache file for a data file's name validated as ``model`` (a later key overwrites it)."""
    return catalog_cache_dir() / f"{path.name}.{model.__module__}.{model.__qualname__}.pickle"


def _trusted(fd: int) -> bool:
    """The slot is this user's and nobody else can write it (pickles run code when loaded)."""
    if not hasattr(os, "getuid"):  # pragma: no cover - not on POSIX
        return True
    st = os.fstat(fd)
    return st.st_uid == os.getuid() and not st.st_mode & 0o022


def load(path: Path, model: type[M], key: bytes) -> M | None:
    """The cached model for ``path`` when its slot carries ``key``; None on any other outcome."""
    header = FORMAT + key + b"\n"
    try:
        with open(slot(path, model), "rb") as f:
            if not _trusted(f.fileno()) or f.read(len(header)) != header:
                return None
            blob = f.read()
    except (OSError, RuntimeError):  # RuntimeError: Path.home() without a home folder
        return None
    try:
        obj = pickle.loads(blob)
    except Exception:  # a truncated or corrupt slot is a miss, whatever the unpickler raises
        return None
    return obj if type(obj) is model else None


def store(path: Path, model: type[DataclassInstance], key: bytes, obj: DataclassInstance) -> None:
    """Write the slot atomically; any failure leaves the cache as it was and is not an error."""
    from envbuild import atomic  # only when writing: a cache hit does not pay for it

    try:
        target = slot(path, model)
        target.parent.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        target.parent.mkdir(mode=0o700, exist_ok=True)
        blob = FORMAT + key + b"\n" + pickle.dumps(obj, protocol=PROTOCOL)
    except Exception:  # an unwritable folder or an object that does not pickle: no cache, no error
        return
    with contextlib.suppress(OSError):
        atomic.write_bytes(target, blob, mode=0o600)  # private, as load() requires
