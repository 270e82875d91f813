"""URLs as a lock records them: no path of this machine, no credential.

- An index or ``--find-links`` URL with credentials (``https://user:token@host/simple``, a secret
  query parameter such as ``?token=...``, the token in a Cloudsmith/packagecloud/Gemfury path) is
  recorded with ``${VAR}`` references in their place
  (:func:`lock_url`): ``https://${ENVBUILD_INDEX_1_USER}:${ENVBUILD_INDEX_1_TOKEN}@host/simple``.  pip
  expands ``${VAR}`` in a requirements file from the environment, and ``envbuild fetch`` does the same
  (:func:`expand`), so the lock and ``requirements-rebuild.txt`` carry the variable names, never values.
  ``N`` is the URL's position among the lock's indexes (1 is the primary ``--index-url``), or among
  its ``--find-links`` URLs (``ENVBUILD_FIND_LINKS_N_...``).
- A local ``--find-links`` folder (a path, or a ``file:`` URL) is not recorded at all: the files the
  lock took from it are recorded by name and sha256 (``LockedFile.url`` is empty, the distribution's
  ``index`` is :data:`LOCAL_FOLDER`), and ``envbuild fetch --find-links DIR`` finds them again.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from typing import NamedTuple
from urllib.parse import unquote, urlsplit

from envbuild.models import LOCAL_FOLDER, Lock, LockResolution

__all__ = [
    "LOCAL_FOLDER",
    "Route",
    "expand",
    "install_route",
    "is_local",
    "lock_file_url",
    "lock_url",
    "lock_urls",
    "remote_links",
    "unset_variables",
    "variables",
]

_VARIABLE = re.compile(r"\$\{([A-Z0-9_]+)\}")  # pip's own rule: ${NAME}, upper case, digits, underscore
_PLACEHOLDER = re.compile(r"\$\{[A-Z0-9_]+\}")


def is_local(link: str) -> bool:
    """A folder of this machine: a path, or a ``file:`` URL."""
    return "://" not in link or urlsplit(link).scheme == "file"


def _word(key: str) -> str:
    return re.sub(r"[^A-Z0-9]+", "_", key.upper()).strip("_") or "VALUE"


def lock_url(url: str, prefix: str) -> str:
    """``url`` with each credential replaced by a ``${PREFIX_...}`` reference (``ENVBUILD_INDEX_1_...``).

    The credentials are those of the one rule (:func:`envbuild.secrets.url_parts`): user info
    ``user:password@`` becomes ``${PREFIX_USER}:${PREFIX_TOKEN}@``, a lone ``token@``
    ``${PREFIX_TOKEN}@``; a secret query parameter ``name=${PREFIX_NAME}``; the access token in a
    Cloudsmith/packagecloud/Gemfury path ``${PREFIX_PATH_TOKEN}``.  pip, uv and ``envbuild fetch``
    fill each reference from the environment.  Parts that already are ``${VAR}`` references are kept."""
    from envbuild.secrets import url_parts

    parts = url_parts(url)
    names = {"password": "TOKEN", "path": "PATH_TOKEN"}
    out: list[str] = []
    last = 0
    for index, part in enumerate(parts):
        if part.kind == "user":
            has_password = index + 1 < len(parts) and parts[index + 1].kind == "password"
            word = "USER" if has_password else "TOKEN"
        else:
            word = _word(part.name) if part.kind == "query" else names[part.kind]
        original = url[part.start : part.end]
        reference = original if _PLACEHOLDER.fullmatch(original) else f"${{{prefix}_{word}}}"
        out += [url[last : part.start], reference]
        last = part.end
    out.append(url[last:])
    return "".join(out)


def lock_urls(urls: Iterable[str], kind: str = "INDEX") -> tuple[str, ...]:
    """Each URL as :func:`lock_url` records it, numbered from 1 in order (``ENVBUILD_INDEX_1``, ...)."""
    return tuple(lock_url(url, f"ENVBUILD_{kind}_{n}") for n, url in enumerate(urls, 1))


def remote_links(links: Iterable[str]) -> tuple[str, ...]:
    """The ``--find-links`` URLs a lock records: every one that is not a local folder."""
    return lock_urls((link for link in links if not is_local(link)), "FIND_LINKS")


def lock_file_url(url: str) -> str:
    """A locked file's URL as recorded: empty for a file in a local folder (recorded by name and
    sha256 only), else without credentials."""
    from envbuild.net import redact_url

    return "" if is_local(url) else redact_url(url)


def variables(text: str) -> tuple[str, ...]:
    """The ``${VAR}`` names in ``text``, in order, each once."""
    return tuple(dict.fromkeys(_VARIABLE.findall(text)))


def unset_variables(text: str) -> tuple[str, ...]:
    """The ``${VAR}`` names in ``text`` that the environment does not set (pip leaves those as they are)."""
    return tuple(name for name in variables(text) if not os.environ.get(name))


def expand(url: str) -> str:
    """``url`` with its ``${VAR}`` references filled from the environment, as pip fills them."""
    return _VARIABLE.sub(lambda m: os.environ.get(m.group(1)) or m.group(0), url)


def local_path(link: str) -> str:
    """The folder a local ``--find-links`` names (a path, or a ``file:`` URL's path)."""
    return unquote(urlsplit(link).path) if "://" in link else link


class Route(NamedTuple):
    """How a locked ``requirements-rebuild.txt`` installs on a clean pip (no pip configuration)."""

    local: tuple[str, ...]  # specs of the distributions taken from a local --find-links folder
    variables: tuple[str, ...]  # the ${VAR}s the file's index / find-links URLs need set

    @property
    def wheelhouse(self) -> bool:
        """True: only from the bundle's wheelhouse (``--no-index --find-links wheelhouse``), after
        ``envbuild fetch``; False: from the indexes the file names, too."""
        return bool(self.local)


def install_route(lock: Lock) -> Route:
    """The install route of a resolved lock: the index route when every locked file comes from an index
    or a ``--find-links`` URL, else the wheelhouse route (some files exist only in a local folder)."""
    local = tuple(dict.fromkeys(d.spec for d in lock.distributions if any(not f.url for f in d.files)))
    res = lock.resolution
    urls = " ".join([*res.index_urls, *res.find_links]) if res is not None else ""
    return Route(local, variables(urls))


def index_options(res: LockResolution) -> Iterator[str]:
    """The pip option lines naming a resolution's indexes and find-links, as the lock recorded them
    (``--index-url``, ``--extra-index-url``, ``--find-links``), each checked to be one plain line."""
    from envbuild.render.quote import check_plain

    for i, url in enumerate(res.index_urls):
        yield f"{'--index-url' if i == 0 else '--extra-index-url'} {check_plain(url, 'index url')}"
    for link in res.find_links:
        yield f"--find-links {check_plain(link, 'find-links')}"
