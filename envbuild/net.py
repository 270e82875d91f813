"""HTTP(S) downloads that honour the trust and proxy settings pip users already have.

Trust: ``PIP_CERT``, then ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``, else the system store (Python's default
paths).  Proxies: ``HTTPS_PROXY`` / ``HTTP_PROXY`` / ``NO_PROXY`` (urllib reads them).  ``file://`` URLs
(a ``--find-links`` folder) are read from disk.  Nothing here keeps credentials: a URL's user info is
never logged, and callers strip it before writing a URL anywhere.
"""

from __future__ import annotations

import os
import ssl
import threading
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO
from urllib.parse import unquote, urlsplit, urlunsplit

from envbuild import __version__, atomic

USER_AGENT = f"envbuild/{__version__}"
TIMEOUT_S = 60.0


def cert_file() -> str | None:
    """The CA bundle pip would use: PIP_CERT, then SSL_CERT_FILE (None: the system store)."""
    for name in ("PIP_CERT", "SSL_CERT_FILE"):
        value = os.environ.get(name)
        if value and Path(value).is_file():
            return value
    return None


def ssl_context() -> ssl.SSLContext:
    return ssl.create_default_context(cafile=cert_file(), capath=os.environ.get("SSL_CERT_DIR") or None)


def redact_url(url: str) -> str:
    """``url`` without its secrets, by the one rule of :mod:`envbuild.secrets` (user info, secret query
    values, the token in a Cloudsmith/packagecloud/Gemfury path): ``https://user:pass@host/x?token=abc``
    -> ``https://***@host/x?token=***``.  ``${VAR}`` references (a lock's credentials,
    envbuild/lock/urls.py) are not secrets and stay."""
    from envbuild.secrets import redact_url as redacted

    return redacted(url)


def basic_auth(url: str) -> tuple[str, str | None]:
    """(``url`` without its user info, the ``Authorization`` header value it carried, or None).

    pip sends ``https://user:password@host/...`` as HTTP basic authentication; so does :func:`open_url`.
    """
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    import base64

    info, host = parts.netloc.rsplit("@", 1)
    user, _, password = info.partition(":")
    token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode()
    return urlunsplit(parts._replace(netloc=host)), f"Basic {token}"


def open_url(url: str, *, accept: str | None = None, timeout: float = TIMEOUT_S) -> BinaryIO:
    """Open ``url`` for reading (http, https or file)."""
    parts = urlsplit(url)
    if parts.scheme == "file":
        return Path(unquote(parts.path)).open("rb")
    if parts.scheme not in ("http", "https"):
        raise OSError(f"unsupported URL scheme {parts.scheme!r} in {redact_url(url)}")
    headers = {"User-Agent": USER_AGENT}
    if accept:
        headers["Accept"] = accept
    url, authorization = basic_auth(url)  # user info in the URL (a private index): HTTP basic auth
    if authorization is not None:
        headers["Authorization"] = authorization
    request = urllib.request.Request(url, headers=headers)
    handlers: list[urllib.request.BaseHandler] = [
        urllib.request.ProxyHandler(),
        urllib.request.HTTPSHandler(context=ssl_context()),
    ]
    opener = urllib.request.build_opener(*handlers)
    response = opener.open(request, timeout=timeout)
    return response  # type: ignore[no-any-return]


CHUNK = 1 << 16  # bytes asked of the socket at a time: a cancel is seen between two of them


class Cancelled(Exception):
    """A :func:`download` stopped because its ``cancel`` event was set (Ctrl-C); nothing was kept."""


def download(
    url: str,
    dest: Path,
    *,
    update: Callable[[bytes], None] | None = None,
    cancel: threading.Event | None = None,
) -> int:
    """Copy ``url`` to ``dest`` (written whole or not at all); return the byte count.

    ``update`` sees every chunk (a hash object's ``update``), so the caller checks bytes as they arrive.
    The body is read in chunks of at most :data:`CHUNK` bytes, each as soon as it arrives (``read1``),
    and ``cancel`` is looked at between two chunks: once it is set, :class:`Cancelled` is raised.  The body
    goes to a temporary file beside ``dest`` (:func:`envbuild.atomic.writing`), renamed onto ``dest`` once
    whole and removed on any failure (a cancel included).
    """
    size = 0
    with open_url(url) as source, atomic.writing(dest) as sink:
        read: Callable[[int], bytes] = getattr(source, "read1", None) or source.read
        while True:
            if cancel is not None and cancel.is_set():
                raise Cancelled(f"{redact_url(url)}: download cancelled")
            chunk = read(CHUNK)
            if not chunk:
                break
            sink.write(chunk)
            size += len(chunk)
            if update is not None:
                update(chunk)
        if cancel is not None and cancel.is_set():
            raise Cancelled(f"{redact_url(url)}: download cancelled")
    return size
