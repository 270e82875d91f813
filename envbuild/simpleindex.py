"""Reading package-index pages: the one reader for ``envbuild lock`` (sdists and wheels of a project),
the served-build probe (:mod:`envbuild.lock.served`) and ``envbuild catalog refresh``.

Three kinds of page, parsed by pypi-simple (jwodder's library: PEP 503, 691, 658/714, 592 and 629):

* a PEP 691 JSON project page (``application/vnd.pypi.simple.v1+json``): each file's ``filename``;
* a PEP 503 HTML project page: each file is named by its anchor's text, which PEP 503 requires to be
  the file name (``torch-2.0.0+cu118-...whl``, whatever the href's escaping: ``...2.0.0%2Bcu118...``);
* a pip ``--find-links`` HTML page (``download.pytorch.org/whl/torch_stable.html``), whose anchor texts
  are not file names (``cu118/torch-2.0.0+cu118-...whl``): each file is named by the last path segment
  of its href, URL-decoded.

File URLs are absolute (resolved against the page's URL and any ``<base href>``), without the
``#sha256=`` fragment.  Fetching is not done here: callers read pages with :func:`envbuild.net.open_url`
(trust, proxies, credentials).  pypi-simple is imported on first use (it imports pydantic and requests).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

if TYPE_CHECKING:
    from pypi_simple import DistributionPackage

# What a reader of all three formats asks for: JSON first, then PEP 503 HTML under either name.
ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"


class PageError(ValueError):
    """A body that is not a simple-index page of the format it was read as."""


@dataclass(frozen=True)
class IndexFile:
    filename: str  # "torch-2.0.0+cu118-cp311-cp311-linux_x86_64.whl": decoded, as the file is named
    url: str  # absolute, without its "#sha256=..." fragment
    requires_python: str | None = None
    yanked: bool = False
    has_metadata: bool = False  # the index serves its core metadata at url + ".metadata" (PEP 658/714)


def is_json(content_type: str) -> bool:
    """Whether a response's ``Content-Type`` is the JSON form (else the page is read as HTML)."""
    return "json" in content_type.lower()


def read_page(body: bytes, content_type: str, page_url: str) -> list[IndexFile]:
    """The files of a project page, JSON or HTML as its ``Content-Type`` says."""
    return read_json(body, page_url) if is_json(content_type) else read_html(body, page_url)


def read_json(body: bytes, page_url: str) -> list[IndexFile]:
    """The files of a PEP 691 JSON project page."""
    from pydantic import ValidationError
    from pypi_simple import ProjectPage, UnsupportedRepoVersionError

    try:
        data = json.loads(body)
        with _newer_minor_versions_accepted():
            page = ProjectPage.from_json_data(data, base_url=page_url)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise PageError(f"not a PEP 691 JSON project page ({where}: {first['msg']})") from None
    except (ValueError, UnsupportedRepoVersionError) as exc:
        raise PageError(f"not a PEP 691 JSON project page ({exc})") from None
    # The PEP 658 key PyPI wrote before PEP 714 renamed it ("core-metadata"); some mirrors still do.
    legacy = [isinstance(e, dict) and bool(e.get("data-dist-info-metadata")) for e in data["files"]]
    return [_file(p, p.filename, old) for p, old in zip(page.packages, legacy, strict=True)]


def read_html(body: bytes, page_url: str) -> list[IndexFile]:
    """The files of a PEP 503 HTML project page, named by their anchors' text."""
    return [_file(p, p.filename, old) for p, old in _links(body, page_url)]


def read_find_links(body: bytes, page_url: str) -> list[IndexFile]:
    """The files of a pip ``--find-links`` HTML page, named by the decoded last segment of their href."""
    return [
        _file(p, unquote(urlsplit(p.url).path.rsplit("/", 1)[-1]), old) for p, old in _links(body, page_url)
    ]


def _links(body: bytes, page_url: str) -> list[tuple[DistributionPackage, bool]]:
    from pypi_simple import DistributionPackage, RepositoryPage, UnsupportedRepoVersionError

    try:
        with _newer_minor_versions_accepted():
            page = RepositoryPage.from_html(body.decode("utf-8", "replace"), base_url=page_url)
    except UnsupportedRepoVersionError as exc:
        raise PageError(f"not a PEP 503 HTML page this reader knows ({exc})") from None
    return [
        (DistributionPackage.from_link(link), bool(link.attrs.get("data-dist-info-metadata")))
        for link in page.links
    ]


def _file(package: DistributionPackage, filename: str, legacy_metadata: bool) -> IndexFile:
    return IndexFile(
        filename=filename,
        url=package.url,
        requires_python=package.requires_python or None,
        yanked=package.is_yanked,
        has_metadata=bool(package.has_metadata) or legacy_metadata,
    )


@contextmanager
def _newer_minor_versions_accepted() -> Iterator[None]:
    """A page declaring a newer minor API version (PEP 629: compatible by definition) is read without
    pypi-simple's warning, which would otherwise reach the user's terminal on every lock."""
    from pypi_simple import UnexpectedRepoVersionWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnexpectedRepoVersionWarning)
        yield
