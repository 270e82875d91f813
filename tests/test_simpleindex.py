"""envbuild.simpleindex (issue 33 item 3a): one reader of package-index pages for every caller.

The reader's own behaviours on small hand-written pages (PEP 691 JSON, PEP 503 HTML, a pip find-links
page), then each caller reading a loopback index (tests/index_support.py) whose hrefs are
percent-encoded as PyPI and the PyTorch index write them: a local version's ``+`` is ``%2B`` in the href
(``torch-2.0.0%2Bcu118-...whl``) and plain in the anchor text.  ``envbuild lock``'s sdist/wheel lookup
used to name files by the raw href, so it never saw such a wheel and W-SOURCE-HAS-WHEEL stayed silent.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from index_support import make_wheel, serve_index

from envbuild.catalog.index_pages import FetchError, parse_project, variants_of
from envbuild.lock import uv
from envbuild.lock.served import served_torch
from envbuild.lock.source_build import source_builds
from envbuild.lock.sources import wheel_files
from envbuild.lock.target import Target
from envbuild.lock.uv import RawResolution, Sources
from envbuild.models import LockedDistribution
from envbuild.models.lock import LockedFile
from envbuild.simpleindex import PageError, read_find_links, read_html, read_json, read_page

WHEEL = "torch-2.0.0+cu118-cp311-cp311-manylinux_2_28_x86_64.whl"
QUOTED = WHEEL.replace("+", "%2B")
PAGE = "https://index.example/simple/torch/"
TARGET = Target(python_version="3.11", os="ubuntu24.04")


def _json(*files: dict[str, object], api: str = "1.1") -> bytes:
    return json.dumps({"meta": {"api-version": api}, "name": "torch", "files": list(files)}).encode()


def _entry(**extra: object) -> dict[str, object]:
    return {"filename": WHEEL, "url": f"../../files/{QUOTED}", "hashes": {"sha256": "0" * 64}, **extra}


def _html(*anchors: str) -> bytes:
    return ("<!DOCTYPE html><html><body>" + "\n".join(anchors) + "</body></html>").encode()


# ---- the reader ------------------------------------------------------------------------------------


def test_json_file_name_and_url_resolved_against_the_page() -> None:
    (got,) = read_json(_json(_entry()), PAGE)
    assert (got.filename, got.url) == (WHEEL, f"https://index.example/files/{QUOTED}")


def test_json_requires_python_yanked_and_metadata() -> None:
    plain, reason, flagged, legacy = read_json(
        _json(
            _entry(**{"requires-python": ">=3.8", "core-metadata": {"sha256": "1" * 64}}),
            _entry(yanked="broken build"),
            _entry(yanked=True),
            _entry(**{"data-dist-info-metadata": True}),  # the key PyPI wrote before PEP 714
        ),
        PAGE,
    )
    assert (plain.requires_python, plain.yanked, plain.has_metadata) == (">=3.8", False, True)
    assert (reason.yanked, flagged.yanked, reason.has_metadata) == (True, True, False)
    assert legacy.has_metadata


def test_json_that_is_not_a_project_page_is_a_page_error() -> None:
    for body in (b"<html></html>", b'{"files": []}', _json(api="2.0")):
        with pytest.raises(PageError, match="not a PEP 691 JSON project page"):
            read_json(body, PAGE)


def test_html_file_named_by_its_anchor_text_href_decoded_and_resolved() -> None:
    (got,) = read_html(_html(f'<a href="../../files/{QUOTED}#sha256={"0" * 64}">{WHEEL}</a>'), PAGE)
    assert (got.filename, got.url) == (WHEEL, f"https://index.example/files/{QUOTED}")


def test_html_requires_python_yanked_and_metadata() -> None:
    plain, yanked = read_html(
        _html(
            f'<a href="{QUOTED}" data-requires-python="&gt;=3.8" data-core-metadata="sha256={"1" * 64}">'
            f"{WHEEL}</a>",
            f'<a href="{QUOTED}" data-yanked="">{WHEEL}</a>',
        ),
        PAGE,
    )
    assert (plain.requires_python, plain.yanked, plain.has_metadata) == (">=3.8", False, True)
    assert (yanked.requires_python, yanked.yanked, yanked.has_metadata) == (None, True, False)


def test_find_links_file_named_by_its_decoded_href() -> None:
    """download.pytorch.org/whl/torch_stable.html: the anchor text is ``cu118/<file>``, not a file name."""
    page = "https://download.example/whl/torch_stable.html"
    (got,) = read_find_links(_html(f'<a href="cu118/{QUOTED}">cu118/{WHEEL}</a>'), page)
    assert (got.filename, got.url) == (WHEEL, f"https://download.example/whl/cu118/{QUOTED}")


def test_the_content_type_picks_the_format() -> None:
    assert read_page(_json(_entry()), "application/vnd.pypi.simple.v1+json", PAGE)[0].filename == WHEEL
    assert read_page(_html(f'<a href="{QUOTED}">{WHEEL}</a>'), "text/html", PAGE)[0].filename == WHEEL


# ---- every caller, against a loopback index with percent-encoded hrefs ------------------------------


@pytest.fixture(autouse=True)
def loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pages are read in this process: loopback exempt from any proxy this machine sets."""
    for key in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(key, "127.0.0.1,localhost")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A PyTorch-variant-like index: one torch wheel with a local version, its href ``...%2Bcu118...``."""
    folder = tmp_path_factory.mktemp("cu118")
    wheel = make_wheel(
        folder,
        "torch",
        "2.0.0+cu118",
        python_tag="cp311",
        abi_tag="cp311",
        platform_tag="manylinux_2_28_x86_64",
    )
    assert wheel.name == WHEEL
    with serve_index(folder, quoted=True) as base:
        with urllib.request.urlopen(f"{base}/simple/torch/", timeout=10) as response:
            assert f'href="/files/{QUOTED}#sha256=' in response.read().decode()  # the page is as PyPI's
        yield base


def test_served_torch_reads_a_percent_encoded_index_page(served: str) -> None:
    found = served_torch(Sources(index_urls=(f"{served}/simple/",)), TARGET)
    assert found.builds == {"2.0.0": ("cu118",)}


def test_served_torch_reads_a_find_links_page_with_folder_prefixed_anchors(served: str) -> None:
    with urllib.request.urlopen(f"{served}/links.html", timeout=10) as response:
        assert f">files/{WHEEL}</a>" in response.read().decode()
    found = served_torch(Sources(index_urls=(), find_links=(f"{served}/links.html",)), TARGET)
    assert found.builds == {"2.0.0": ("cu118",)}


def test_wheel_files_sees_a_percent_encoded_wheel(served: str) -> None:
    assert wheel_files("torch", "2.0.0", Sources(index_urls=(f"{served}/simple/",))) == [WHEEL]


def test_source_build_of_a_percent_encoded_wheel_is_w_source_has_wheel(
    served: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The finding's own path (lock.source_build); only the second resolver run is stubbed out."""
    monkeypatch.setattr(uv, "run_uv", lambda *_args: RawResolution(pylock={"packages": []}, annotated=""))
    lock = SimpleNamespace(profile_name="p", build_from_source=("torch",))
    sdist = LockedFile(filename="torch-2.0.0.tar.gz", url="", sha256="0" * 64)
    dist = LockedDistribution(name="torch", version="2.0.0", files=(sdist,), role="source")
    sources = Sources(index_urls=(f"{served}/simple/",))
    _, findings = source_builds(lock, {}, [dist], [], tmp_path, TARGET, sources)  # type: ignore[arg-type]
    assert [f.code for f in findings] == ["W-SOURCE-HAS-WHEEL"]
    assert f"({WHEEL})" in findings[0].message


def test_catalog_variants_of_a_percent_encoded_page(served: str) -> None:
    with urllib.request.urlopen(f"{served}/simple/torch/", timeout=10) as response:
        assert variants_of(response.read()) == {"2.0.0": {"cu118"}}


def test_catalog_project_page_that_is_not_json_is_a_fetch_error() -> None:
    with pytest.raises(FetchError, match=r"^https://index.example/simple/torch/: not a PEP 691 JSON"):
        parse_project("torch", PAGE, _html(f'<a href="{QUOTED}">{WHEEL}</a>'))
