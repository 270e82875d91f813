"""Locate files that ship with envbuild (templates, built-in profiles, catalog data) and its cache.

In a wheel, ``templates/`` and ``profiles/`` are packaged under ``envbuild/_data/``; in a checkout
(or an editable install) they are the top-level folders beside the package.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


@cache
def _data_root(name: str) -> Path:
    packaged = _PACKAGE / "_data" / name
    if packaged.is_dir():
        return packaged
    checkout = _PACKAGE.parent / name
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(f"envbuild installation is incomplete: no {name}/ folder in {_PACKAGE}")


def templates_dir() -> Path:
    return _data_root("templates")


def profiles_dir() -> Path:
    return _data_root("profiles")


def catalog_dir() -> Path:
    """Catalog data files (TOML, one source per row) live inside the package."""
    return _PACKAGE / "data"


def cache_dir() -> Path:
    """envbuild's per-user cache: ``$XDG_CACHE_HOME/envbuild``, or ``~/.cache/envbuild`` when the
    variable is unset, empty or relative (as the XDG base directory spec says).

    It holds only what envbuild can rebuild (validated catalog files, compiled templates); deleting it
    costs the next start its time.  Raises RuntimeError when there is no home folder to default to.
    """
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "envbuild"


def data_dir() -> Path:
    """envbuild's per-user data: ``$XDG_DATA_HOME/envbuild``, or ``~/.local/share/envbuild`` when the
    variable is unset, empty or relative (as the XDG base directory spec says).

    It holds what the user asked envbuild to record (the catalog overlay ``envbuild catalog refresh``
    writes); unlike the cache, deleting it changes what ``check`` accepts.  Raises RuntimeError when
    there is no home folder to default to.
    """
    xdg = os.environ.get("XDG_DATA_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return base / "envbuild"
