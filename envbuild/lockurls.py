"""URLs as a lock records them: no path of this machine, no credential.

- An index or ``--find-links`` URL with credentials (``https://user:token@host/simple``, or a secret
  query parameter such as ``?token=...``) is recorded with ``${VAR}`` references in their place
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
from collections.abc import Iterable
from typing import NamedTuple
from urllib.parse import parse_qsl, quote, unquote, urlsplit, urlunsplit

from envbuild.models import LOCAL_FOLDER, Lock

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


def _secret_query_key(key: str, value: str) -> bool:
    from envbuild.secrets import is_secret_value, name_reason

    return (
        bool(value)
        and not _PLACEHOLDER.fullmatch(value)
        and (name_reason(key) is not None or is_secret_value(value))
    )


def _word(key: str) -> str:
    return re.sub(r"[^A-Z0-9]+", "_", key.upper()).strip("_") or "VALUE"


def lock_url(url: str, prefix: str) -> str:
    """``url`` with each credential replaced by a ``${PREFIX_...}`` reference (``ENVBUILD_INDEX_1_...``).

    User info ``user:password@`` becomes ``${PREFIX_USER}:${PREFIX_TOKEN}@``, a lone ``token@``
    ``${PREFIX_TOKEN}@``; a query parameter whose name or value is a secret by envbuild's policy
    (:mod:`envbuild.secrets`) becomes ``name=${PREFIX_NAME}``.  Parts that already are ``${VAR}``
    references are kept."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        info, host = netloc.rsplit("@", 1)
        user, colon, password = info.partition(":")
        if colon:
            user = user if _PLACEHOLDER.fullmatch(user) else f"${{{prefix}_USER}}"
            password = password if _PLACEHOLDER.fullmatch(password) else f"${{{prefix}_TOKEN}}"
            netloc = f"{user}:{password}@{host}"
        else:
            netloc = f"{user if _PLACEHOLDER.fullmatch(user) else f'${{{prefix}_TOKEN}}'}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(_secret_query_key(k, v) for k, v in pairs):
            query = "&".join(
                f"{quote(k, safe='')}="
                + (f"${{{prefix}_{_word(k)}}}" if _secret_query_key(k, v) else quote(v, safe=""))
                for k, v in pairs
            )
    return urlunsplit(parts._replace(netloc=netloc, query=query))


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
    local = tuple(d.spec for d in lock.distributions if any(not f.url for f in d.files))
    res = lock.resolution
    urls = " ".join([*res.index_urls, *res.find_links]) if res is not None else ""
    return Route(local, variables(urls))
