"""Ask each index and find-links folder which builds of torch it serves for the lock's target.

A PyTorch variant index (``download.pytorch.org/whl/cu130``) serves ``torch-2.14.1+cu130-...whl``; the
package index and its mirrors serve one default build per release, ``torch-2.14.1-...whl``, without a
local tag.  The planner needs to know which kind it will resolve against before it writes the pins
(:func:`envbuild.plan.check`, ``served=``): a pin with a local tag that the index does not serve fails
to resolve, and used to be reported as a conflict between requirements, which it is not.

Index pages are read as PEP 691 JSON when the index offers it, else as PEP 503 HTML; a find-links folder
is listed from disk, a find-links URL read as a find-links HTML page (:mod:`envbuild.simpleindex` reads
all three).  A 404 means "no torch here".
"""

from __future__ import annotations

import os
import urllib.error
from pathlib import Path
from urllib.parse import unquote, urlsplit

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from envbuild.lock.resolve import ResolveError
from envbuild.lock.target import Target
from envbuild.lock.uv import Sources
from envbuild.net import open_url, redact_url
from envbuild.plan.resolved import ServedTorch, kind_of
from envbuild.simpleindex import ACCEPT, PageError, read_find_links, read_page
from envbuild.untrusted import one_line


def _read_index(url: str) -> list[str] | None:
    """The file names an index lists for torch; None when it has no torch project (404)."""
    page = url.rstrip("/") + "/torch/"
    try:
        with open_url(page, accept=ACCEPT, timeout=30) as response:
            body = response.read()
            content_type = str(getattr(response, "headers", {}).get("Content-Type", "text/html"))
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise ResolveError(
            f"the index {redact_url(url)} answered HTTP {exc.code} for its torch page; pass --index-url "
            "for a reachable mirror, or --find-links for a folder of wheels"
        ) from None
    except (OSError, ValueError) as exc:
        tls = (
            "The index's TLS certificate is not trusted: point PIP_CERT or SSL_CERT_FILE at the CA bundle "
            "that signs it (the system store is used too). "
            if "certificate" in str(exc)
            else ""
        )
        raise ResolveError(
            f"the resolver could not read an index ({redact_url(url)}): {one_line(exc)} {tls}Pass "
            "--index-url for a reachable mirror, or --find-links for a folder of wheels (repeatable)"
        ) from None
    try:
        return [f.filename for f in read_page(body, content_type, page)]
    except PageError as exc:
        raise ResolveError(
            f"the index {redact_url(url)} served a torch page that cannot be read: {exc}; pass --index-url "
            "for a reachable mirror, or --find-links for a folder of wheels"
        ) from None


def _read_links(link: str) -> list[str]:
    parts = urlsplit(link)
    if parts.scheme in ("", "file"):
        folder = Path(unquote(parts.path) if parts.scheme else link)
        try:
            return sorted(os.listdir(folder))
        except OSError as exc:
            raise ResolveError(f"--find-links {link}: cannot list the folder ({exc.strerror})") from None
    try:
        with open_url(link, accept="text/html", timeout=30) as response:
            body = response.read()
    except (OSError, ValueError) as exc:
        raise ResolveError(f"could not read --find-links {redact_url(link)} ({exc})") from None
    try:
        return [f.filename for f in read_find_links(body, link)]
    except PageError as exc:
        raise ResolveError(f"could not read --find-links {redact_url(link)} ({exc})") from None


def _torch_builds(filenames: list[str], target: Target) -> dict[str, set[str]]:
    """public version -> local tags ("" for none) of the torch wheels installable on ``target``."""
    builds: dict[str, set[str]] = {}
    for name in filenames:
        if not name.lower().startswith("torch-") or not name.endswith(".whl"):
            continue
        try:
            project, version, _, tags = parse_wheel_filename(name)
        except InvalidWheelFilename:
            continue
        if project != "torch" or not set(tags) & target.tags:
            continue
        builds.setdefault(version.public, set()).add(version.local or "")
    return builds


def served_torch(sources: Sources, target: Target) -> ServedTorch:
    """What ``sources`` serve for torch on ``target`` (reads every index and folder once)."""
    merged: dict[str, set[str]] = {}
    asked: list[str] = []
    kinds: list[str] = []
    for url, names in [(u, _read_index(u)) for u in sources.index_urls] + [
        (link, _read_links(link)) for link in sources.find_links
    ]:
        builds = _torch_builds(names or [], target)
        asked.append(redact_url(url))
        kinds.append(kind_of(tag for tags in builds.values() for tag in tags))
        for version, tags in builds.items():
            merged.setdefault(version, set()).update(tags)
    return ServedTorch(
        builds={v: tuple(sorted(t)) for v, t in sorted(merged.items())},
        sources=tuple(asked),
        kinds=tuple(kinds),
    )
