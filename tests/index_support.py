"""Small real distributions, built by the tests, and a PEP 503 "simple" index serving them on loopback.

Nothing here touches the network beyond 127.0.0.1: ``make_wheel``/``make_sdist`` write real,
byte-deterministic wheels and sdists (same arguments, same sha256), ``tamper`` rewrites a wheel in
place (same name, other bytes, still internally consistent), and ``serve_index`` serves a folder of
such files as a simple index that pip and ``uv pip compile`` accept.

The standard universe (``build_index_tree(tmp_path)``, served by ``serve_tree(tree)``)::

    tmp_path/indexes/main/    the "pypi-like" main index (and a find-links folder)
        fakedep    1.0, 1.1              wheels, pure python, no dependencies
        leftpad    1.0                   wheel, Requires-Dist: fakedep<1.1
        rightpad   1.0                   wheel, Requires-Dist: fakedep>=1.1   (leftpad + rightpad conflict)
        flashlike  2.8.3                 sdist only, legacy setup.py that does ``import torch`` first
        plainsrc   0.1                   sdist only, pyproject.toml with an in-tree PEP 517 backend
                                         (builds offline: no setuptools, no build requirements)
        setuptools 65.5.0                the wheel bundled with ensurepip, when this Python has one
                                         (3.10/3.11), so an isolated build of flashlike gets as far as
                                         running setup.py and fails on ``import torch``, as flash-attn does
    tmp_path/indexes/cpu/     torchlike 2.13.0+cpu    wheel, Requires-Dist: fakedep>=1.0
    tmp_path/indexes/cu128/   torchlike 2.13.0+cu128  wheel, Requires-Dist: fakedep>=1.0

Each folder is served by its own server (``serve_tree``) like the PyTorch per-variant indexes:
``urls.main``, ``urls.cpu``, ``urls.cu128`` are ``http://127.0.0.1:<port>/simple/``.

Index pages: ``/simple/`` lists projects, ``/simple/<normalized-name>/`` has one anchor per file,
``/files/<filename>#sha256=<hex>`` with ``data-requires-python`` when the metadata has it and
``data-dist-info-metadata``/``data-core-metadata`` (PEP 658/714) for wheels, whose metadata is served at
``/files/<filename>.metadata``.  With ``serve_index(..., quoted=True)`` the hrefs are percent-encoded
as PyPI's and the PyTorch index's are (``torch-2.0.0%2Bcu118-...whl``; the anchor text stays the file
name).  ``/links.html`` is a pip ``--find-links`` page of every file, like the PyTorch index's
``torch_stable.html``: relative hrefs ``files/<filename>`` and anchor texts ``files/<filename>`` (a
folder, then the file name).  Pages are rebuilt from the folder on every request, so a file added or
tampered with while serving shows up (with its new hash) at once.
"""

from __future__ import annotations

import base64
import csv
import email.parser
import functools
import gzip
import hashlib
import html
import io
import re
import shutil
import ssl
import stat
import subprocess
import tarfile
import threading
import zipfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

# 1980-01-01, the earliest time a zip entry can hold; tar members and the gzip header use the same.
ZIP_TIME = (1980, 1, 1, 0, 0, 0)
TAR_MTIME = 315532800

__all__ = [
    "IndexTree",
    "IndexURLs",
    "build_index_tree",
    "dripping_server",
    "loopback",
    "make_sdist",
    "make_wheel",
    "normalize",
    "serve_folder",
    "serve_index",
    "serve_tree",
    "sha256_of",
    "tamper",
]


def normalize(name: str) -> str:
    """PEP 503 normalised project name (``Foo_Bar.baz`` → ``foo-bar-baz``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _file_stem(name: str) -> str:
    """The name as wheel/sdist file names and import packages spell it (``foo-bar`` → ``foo_bar``)."""
    return normalize(name).replace("-", "_")


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _metadata(
    name: str,
    version: str,
    requires: Iterable[str],
    requires_python: str | None,
    metadata_version: str = "2.1",
) -> str:
    lines = [f"Metadata-Version: {metadata_version}", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {req}" for req in requires]
    if requires_python:
        lines.append(f"Requires-Python: {requires_python}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- wheels


def _record_digest(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def _write_wheel(path: Path, entries: dict[str, bytes]) -> None:
    """Write ``entries`` (without RECORD) as a wheel: sorted, fixed times and modes, RECORD last."""
    (dist_info,) = {arc.split("/", 1)[0] for arc in entries if arc.split("/", 1)[0].endswith(".dist-info")}
    record_name = f"{dist_info}/RECORD"
    names = sorted(arc for arc in entries if arc != record_name)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    for arc in names:
        writer.writerow([arc, _record_digest(entries[arc]), len(entries[arc])])
    writer.writerow([record_name, "", ""])
    ordered = [(arc, entries[arc]) for arc in names] + [(record_name, buffer.getvalue().encode())]
    raw = io.BytesIO()
    with zipfile.ZipFile(raw, "w") as zf:
        for arc, data in ordered:
            info = zipfile.ZipInfo(arc, date_time=ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o100644 & 0xFFFF) << 16
            info.create_system = 3  # unix, so the mode bits above are read
            zf.writestr(info, data, compresslevel=6)
    path.write_bytes(raw.getvalue())


def make_wheel(
    dest: Path,
    name: str,
    version: str,
    *,
    requires: Iterable[str] = (),
    python_tag: str = "py3",
    abi_tag: str = "none",
    platform_tag: str = "any",
    files: dict[str, str] | None = None,
    requires_python: str | None = None,
) -> Path:
    """Write ``dest/{name}-{version}-{python}-{abi}-{platform}.whl`` and return its path.

    The wheel holds ``{pkg}/__init__.py`` (``__version__ = "<version>"``), any extra ``files``
    (archive path → text; one named ``{pkg}/__init__.py`` replaces the default), and a dist-info with
    METADATA, WHEEL and a RECORD of urlsafe-b64 sha256 digests.  ``name`` is normalised for the file
    and package name (``Foo.Bar`` → ``foo_bar``); a local version (``2.13.0+cpu``) is kept as is.
    """
    dest.mkdir(parents=True, exist_ok=True)
    stem = _file_stem(name)
    dist_info = f"{stem}-{version}.dist-info"
    tag = f"{python_tag}-{abi_tag}-{platform_tag}"
    purelib = abi_tag == "none" and platform_tag == "any"
    entries: dict[str, bytes] = {f"{stem}/__init__.py": f'__version__ = "{version}"\n'.encode()}
    for arc, text in (files or {}).items():
        entries[arc] = text.encode()
    entries[f"{dist_info}/METADATA"] = _metadata(name, version, requires, requires_python).encode()
    wheel_lines = [
        "Wheel-Version: 1.0",
        "Generator: envbuild-tests (index_support)",
        f"Root-Is-Purelib: {'true' if purelib else 'false'}",
    ]
    # a compressed tag set (py2.py3-none-any) is one Tag line per expanded tag
    wheel_lines += [
        f"Tag: {py}-{abi}-{plat}"
        for py in python_tag.split(".")
        for abi in abi_tag.split(".")
        for plat in platform_tag.split(".")
    ]
    entries[f"{dist_info}/WHEEL"] = ("\n".join(wheel_lines) + "\n").encode()
    path = dest / f"{stem}-{version}-{tag}.whl"
    _write_wheel(path, entries)
    return path


def _wheel_entries(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as zf:
        return {info.filename: zf.read(info) for info in zf.infolist() if not info.is_dir()}


def tamper(wheel: Path) -> None:
    """Rewrite ``wheel`` in place: same file name, other bytes.

    The package's ``__init__.py`` gains a line and a ``_tampered.py`` module is added; RECORD is
    rewritten to match, so the wheel is still valid and installs. Only its sha256 gives it away.
    """
    entries = _wheel_entries(wheel)
    (dist_info,) = {arc.split("/", 1)[0] for arc in entries if arc.split("/", 1)[0].endswith(".dist-info")}
    entries.pop(f"{dist_info}/RECORD", None)
    inits = sorted(arc for arc in entries if arc.endswith("/__init__.py") and arc.count("/") == 1)
    package = inits[0].split("/", 1)[0] if inits else _file_stem(dist_info.split("-", 1)[0])
    init = f"{package}/__init__.py"
    entries[init] = entries.get(init, b"") + b"TAMPERED = True\n"
    entries[f"{package}/_tampered.py"] = b"# not what the lock recorded\n"
    _write_wheel(wheel, entries)


# ---------------------------------------------------------------- sdists


def setuptools_pyproject(name: str, version: str, dependencies: Iterable[str] = ()) -> str:
    """A ``pyproject.toml`` building ``name`` with setuptools (its ``setup.py`` adds what pyproject cannot
    say: extension modules), for :func:`make_sdist`'s ``pyproject``."""
    deps = ", ".join(f'"{d}"' for d in dependencies)
    return (
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "{name}"\nversion = "{version}"\n'
        + (f"dependencies = [{deps}]\n" if deps else "")
    )


def make_sdist(
    dest: Path,
    name: str,
    version: str,
    *,
    setup_py: str | None = None,
    pyproject: str | None = None,
    requires: Iterable[str] = (),
    files: dict[str, str] | None = None,
    requires_python: str | None = None,
    metadata_version: str = "2.1",
) -> Path:
    """Write ``dest/{name}-{version}.tar.gz`` (name normalised with underscores) and return its path.

    Members live under ``{name}-{version}/``: PKG-INFO, ``setup.py`` and/or ``pyproject.toml`` as
    given (a plain setuptools ``setup.py`` when neither is), ``{pkg}/__init__.py`` and any extra
    ``files`` (path inside the project → text). PKG-INFO is Metadata-Version 2.1 by default, which
    installers do not trust, so they build the sdist to learn its dependencies.  With
    ``metadata_version="2.2"`` *and* a ``pyproject.toml``, uv (0.13) reads PKG-INFO and skips the
    build; a setup.py-only sdist is built whatever PKG-INFO says.  The tar is deterministic: sorted
    members, fixed mtime/owner/modes, gzip header without name or time.
    """
    dest.mkdir(parents=True, exist_ok=True)
    stem = _file_stem(name)
    top = f"{stem}-{version}"
    requires = list(requires)
    members: dict[str, bytes] = {
        "PKG-INFO": _metadata(name, version, requires, requires_python, metadata_version).encode(),
        f"{stem}/__init__.py": f'__version__ = "{version}"\n'.encode(),
    }
    if setup_py is None and pyproject is None:
        setup_py = (
            "from setuptools import setup\n\n"
            f"setup(name={name!r}, version={version!r}, packages=[{stem!r}], install_requires={requires!r})\n"
        )
    if setup_py is not None:
        members["setup.py"] = setup_py.encode()
    if pyproject is not None:
        members["pyproject.toml"] = pyproject.encode()
    for rel, text in (files or {}).items():
        members[rel] = text.encode()

    raw = io.BytesIO()
    with (
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        dirs = {top}
        for rel in members:
            parts = rel.split("/")[:-1]
            dirs.update(f"{top}/" + "/".join(parts[: i + 1]) for i in range(len(parts)))
        for arc in sorted(dirs | {f"{top}/{rel}" for rel in members}):
            info = tarfile.TarInfo(arc)
            info.mtime = TAR_MTIME
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if arc in dirs:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                data = members[arc[len(top) + 1 :]]
                info.mode, info.size = 0o644, len(data)
                tar.addfile(info, io.BytesIO(data))
    path = dest / f"{top}.tar.gz"
    path.write_bytes(raw.getvalue())
    return path


# ---------------------------------------------------------------- the index


@dataclass(frozen=True)
class _Dist:
    filename: str
    project: str  # normalised
    sha256: str
    requires_python: str | None
    metadata: bytes | None  # core metadata, for PEP 658 (wheels only)


def _read_dist(path: Path) -> _Dist | None:
    """Project name and Requires-Python from a wheel's METADATA or an sdist's PKG-INFO."""
    name = path.name
    raw_meta: bytes | None = None
    try:
        if name.endswith(".whl"):
            with zipfile.ZipFile(path) as zf:
                metas = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
                raw_meta = zf.read(metas[0]) if metas else None
        elif name.endswith((".tar.gz", ".tgz")):
            with tarfile.open(path, "r:gz") as tar:
                infos = [
                    m for m in tar.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO")
                ]
                handle = tar.extractfile(infos[0]) if infos else None
                raw_meta = handle.read() if handle else None
        else:
            return None
    except (OSError, zipfile.BadZipFile, tarfile.TarError):
        raw_meta = None
    fields = email.parser.BytesParser().parsebytes(raw_meta, headersonly=True) if raw_meta else None
    project = fields.get("Name") if fields else None
    if not project:  # fall back on the file name: {name}-{version}...
        project = name.split("-", 1)[0]
    return _Dist(
        filename=name,
        project=normalize(str(project)),
        sha256=sha256_of(path),
        requires_python=fields.get("Requires-Python") if fields else None,
        metadata=raw_meta if name.endswith(".whl") else None,
    )


@functools.cache
def _read_known(path: str, dev: int, ino: int, size: int, mtime_ns: int, ctime_ns: int) -> _Dist | None:
    """:func:`_read_dist` once per file identity.  A request lists the folder and stats each file, and reads
    (unzips, hashes) only a file that is new or changed since: reading every file again on every request
    cost about 45 ms a request for the torch universe (a uv resolution took 3-5 s on loopback).  Tests change
    served files (newer versions, other bytes under one name): a changed file has another inode, size, mtime
    or ctime, and is read again."""
    return _read_dist(Path(path))


def _scan(root: Path) -> dict[str, list[_Dist]]:
    projects: dict[str, list[_Dist]] = {}
    for path in sorted(root.iterdir()):
        try:
            st = path.stat()
        except OSError:  # removed meanwhile
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        dist = _read_known(str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        if dist is not None:
            projects.setdefault(dist.project, []).append(dist)
    return projects


def _page(title: str, body: list[str]) -> bytes:
    return (
        "<!DOCTYPE html>\n<html>\n<head>"
        '<meta name="pypi:repository-version" content="1.0">'
        f"<title>{html.escape(title)}</title></head>\n<body>\n" + "\n".join(body) + "\n</body>\n</html>\n"
    ).encode()


def _href(filename: str, quoted: bool) -> str:
    return html.escape(quote(filename) if quoted else filename)


def _project_page(project: str, dists: list[_Dist], quoted: bool = False) -> bytes:
    anchors = []
    for dist in dists:
        attrs = f'href="/files/{_href(dist.filename, quoted)}#sha256={dist.sha256}"'
        if dist.requires_python:
            attrs += f' data-requires-python="{html.escape(dist.requires_python)}"'
        if dist.metadata is not None:
            meta = f"sha256={hashlib.sha256(dist.metadata).hexdigest()}"
            attrs += f' data-dist-info-metadata="{meta}" data-core-metadata="{meta}"'
        anchors.append(f"<a {attrs}>{html.escape(dist.filename)}</a><br/>")
    return _page(f"Links for {project}", [f"<h1>Links for {html.escape(project)}</h1>", *anchors])


def _links_page(dists: list[_Dist], quoted: bool) -> bytes:
    anchors = [
        f'<a href="files/{_href(d.filename, quoted)}#sha256={d.sha256}">'
        f"files/{html.escape(d.filename)}</a><br/>"
        for d in dists
    ]
    return _page("Find links", anchors)


def _handler(
    root: Path, auth: tuple[str, str] | None = None, quoted: bool = False
) -> type[BaseHTTPRequestHandler]:
    expected = "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode() if auth else None

    class Handler(BaseHTTPRequestHandler):
        # The headers and the body are two writes: no Nagle delay between them (not measured on its own).
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass  # nothing on stderr

        def _send(self, status: int, body: bytes, content_type: str, head: bool) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def _respond(self, head: bool) -> None:
            if expected is not None and self.headers.get("Authorization") != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="envbuild test index"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            path = unquote(self.path.split("?", 1)[0].split("#", 1)[0])
            projects = _scan(root)
            if path == "/simple/":
                links = [f'<a href="/simple/{p}/">{html.escape(p)}</a><br/>' for p in sorted(projects)]
                return self._send(200, _page("Simple index", links), "text/html; charset=utf-8", head)
            if path.startswith("/simple/"):
                name = path[len("/simple/") :].strip("/")
                if not path.endswith("/"):
                    self.send_response(301)
                    self.send_header("Location", f"/simple/{name}/")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return None
                if normalize(name) in projects and name != normalize(name):
                    self.send_response(301)
                    self.send_header("Location", f"/simple/{normalize(name)}/")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return None
                if name in projects:
                    page = _project_page(name, projects[name], quoted)
                    return self._send(200, page, "text/html; charset=utf-8", head)
            if path == "/links.html":
                dists = [d for ds in projects.values() for d in ds]
                return self._send(200, _links_page(dists, quoted), "text/html; charset=utf-8", head)
            if path.startswith("/files/"):
                filename = path[len("/files/") :]
                is_meta = filename.endswith(".metadata")
                target = filename.removesuffix(".metadata") if is_meta else filename
                dists = {d.filename: d for ds in projects.values() for d in ds}
                if "/" not in target and target in dists:
                    if is_meta:
                        meta = dists[target].metadata
                        if meta is not None:
                            return self._send(200, meta, "application/octet-stream", head)
                    else:
                        body = (root / target).read_bytes()
                        return self._send(200, body, "application/octet-stream", head)
            return self._send(404, b"not found\n", "text/plain", head)

        def do_GET(self) -> None:
            self._respond(head=False)

        def do_HEAD(self) -> None:
            self._respond(head=True)

    return Handler


def make_tls(folder: Path) -> tuple[Path, Path, Path]:
    """A test CA and a server certificate for 127.0.0.1 signed by it: (ca.pem, server.pem, server.key)."""
    folder.mkdir(parents=True, exist_ok=True)
    ca, ca_key = folder / "ca.pem", folder / "ca.key"
    cert, key, csr, ext = (
        folder / "server.pem",
        folder / "server.key",
        folder / "server.csr",
        folder / "ext.cnf",
    )

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    openssl(
        *("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=envbuild test CA"),
        *("-keyout", str(ca_key), "-out", str(ca)),
        *("-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"),
    )
    openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        str(key),
        "-out",
        str(csr),
    )
    ext.write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
        "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"
    )
    openssl(
        *("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial"),
        *("-days", "2", "-extfile", str(ext), "-out", str(cert)),
    )
    return ca, cert, key


@contextmanager
def serve_index(
    root: Path,
    tls: tuple[Path, Path] | None = None,
    auth: tuple[str, str] | None = None,
    *,
    quoted: bool = False,
) -> Iterator[str]:
    """Serve the distribution files in ``root`` as a simple index on 127.0.0.1 (a free port).

    Yields the base URL ``http://127.0.0.1:<port>`` (the index is ``<base>/simple/``), or
    ``https://...`` when ``tls`` gives (certificate, key) (see :func:`make_tls`).  The server thread is
    a daemon and is shut down and closed when the block ends.  With ``auth`` (user, password) every
    request without that HTTP basic authentication gets 401, as a private index answers.  With
    ``quoted`` the pages' hrefs are percent-encoded (``%2B`` for ``+``), as real indexes write them.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"no index folder {root}")
    with loopback(_handler(root, auth, quoted), tls=tls, name=f"index:{root.name}") as base:
        yield base


class _Server(ThreadingHTTPServer):
    # uv opens dozens of connections at once; with socketserver's backlog of 5 the kernel drops the SYNs
    # beyond it, and each dropped one is sent again after a second (a resolution stalled 1 s, twice).
    request_queue_size = 128


@contextmanager
def loopback(
    handler: Callable[..., BaseHTTPRequestHandler],
    *,
    tls: tuple[Path, Path] | None = None,
    name: str = "loopback",
) -> Iterator[str]:
    """Serve ``handler`` on 127.0.0.1 (a free port) from a daemon thread: the one server of the tests.

    Yields the base URL ``http://127.0.0.1:<port>`` (``https://`` with ``tls`` = (certificate, key)); the
    server is shut down and closed when the block ends.  :func:`serve_index` and :func:`serve_folder`
    serve files with it; a test that needs a server to misbehave (drip bytes, answer wrong ones) passes
    its own handler."""
    server = _Server(("127.0.0.1", 0), handler)
    scheme = "http"
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(tls[0]), str(tls[1]))
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    server.daemon_threads = True
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=name, daemon=True
    )
    thread.start()
    try:
        yield f"{scheme}://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@contextmanager
def serve_folder(root: Path, hits: list[str] | None = None) -> Iterator[str]:
    """Serve the files under ``root`` as they are (a static web server: ``<base>/<relative path>``,
    ``index.html`` for a folder), each requested path appended to ``hits`` when given."""

    class Folder(SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(root), **kwargs)

        def do_GET(self) -> None:
            if hits is not None:
                hits.append(self.path)
            super().do_GET()

        def log_message(self, format: str, *args: object) -> None:
            pass

    with loopback(Folder, name=f"folder:{root.name}") as base:
        yield base


@contextmanager
def dripping_server(size: int) -> Iterator[str]:
    """A server that misbehaves (a download interrupted mid-way): every path answers 200 with a
    Content-Length of ``size``, then ``/trickle/...`` sends 1 KiB every 20 ms and every other path sends
    nothing, until the block ends."""
    stop = threading.Event()

    class Drip(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            try:
                while not stop.is_set():
                    if self.path.startswith("/trickle/"):
                        self.wfile.write(b"x" * 1024)
                        self.wfile.flush()
                    stop.wait(0.02)
            except OSError:  # the client went away
                pass

        def log_message(self, format: str, *args: object) -> None:
            pass

    try:
        with loopback(Drip, name="dripping") as base:
            yield base
    finally:
        stop.set()


# ---------------------------------------------------------------- the standard universe

FLASHLIKE_SETUP = """\
import torch  # like flash-attn: the build itself needs torch

from setuptools import setup

setup(name="flashlike", version="2.8.3", packages=["flashlike"], install_requires=["torchlike"])
"""

PLAINSRC_PYPROJECT = """\
[build-system]
requires = []
build-backend = "plainsrc_backend"
backend-path = ["_build"]

[project]
name = "plainsrc"
version = "0.1"
"""

# A self-contained PEP 517 backend: builds plainsrc's wheel with the standard library only, so the
# sdist builds offline (no setuptools or wheel from an index).
PLAINSRC_BACKEND = '''\
"""In-tree PEP 517 backend for plainsrc: standard library only."""

import base64
import hashlib
import os
import zipfile

NAME, VERSION = "plainsrc", "0.1"
DIST_INFO = f"{NAME}-{VERSION}.dist-info"
METADATA = f"Metadata-Version: 2.1\\nName: {NAME}\\nVersion: {VERSION}\\n"
WHEEL = "Wheel-Version: 1.0\\nGenerator: plainsrc_backend\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    os.makedirs(os.path.join(metadata_directory, DIST_INFO), exist_ok=True)
    for name, text in (("METADATA", METADATA), ("WHEEL", WHEEL)):
        with open(os.path.join(metadata_directory, DIST_INFO, name), "w") as handle:
            handle.write(text)
    return DIST_INFO


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    with open(os.path.join(NAME, "__init__.py"), "rb") as handle:
        init = handle.read()
    entries = {
        f"{NAME}/__init__.py": init,
        f"{DIST_INFO}/METADATA": METADATA.encode(),
        f"{DIST_INFO}/WHEEL": WHEEL.encode(),
    }
    record = ""
    for arc, data in entries.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += f"{arc},sha256={digest},{len(data)}\\n"
    record += f"{DIST_INFO}/RECORD,,\\n"
    filename = f"{NAME}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w") as zf:
        for arc, data in entries.items():
            zf.writestr(arc, data)
        zf.writestr(f"{DIST_INFO}/RECORD", record)
    return filename
'''


@dataclass(frozen=True)
class IndexTree:
    """The standard universe's folders and files (see the module docstring)."""

    root: Path
    main: Path  # pypi-like: fakedep, leftpad, rightpad, flashlike, plainsrc (+ setuptools)
    cpu: Path  # torchlike 2.13.0+cpu
    cu128: Path  # torchlike 2.13.0+cu128
    files: dict[str, Path]  # "fakedep-1.1" → its file, "torchlike-2.13.0+cpu", "flashlike-2.8.3", ...
    setuptools: Path | None  # ensurepip's setuptools wheel copied into main, when this Python has one


@dataclass(frozen=True)
class IndexURLs:
    """Simple-index URLs (``http://127.0.0.1:<port>/simple/``) of a served ``IndexTree``."""

    main: str
    cpu: str
    cu128: str


def _bundled_setuptools() -> Path | None:
    try:
        import ensurepip
    except ImportError:  # some distributions strip ensurepip
        return None
    bundled = Path(ensurepip.__file__).parent / "_bundled"
    found = sorted(bundled.glob("setuptools-*.whl")) if bundled.is_dir() else []
    return found[-1] if found else None


def build_index_tree(tmp_path: Path, *, with_setuptools: bool = True) -> IndexTree:
    """Build the standard universe under ``tmp_path/indexes`` (see the module docstring)."""
    root = tmp_path / "indexes"
    main, cpu, cu128 = root / "main", root / "cpu", root / "cu128"
    for folder in (main, cpu, cu128):
        folder.mkdir(parents=True, exist_ok=True)
    files = {
        "fakedep-1.0": make_wheel(main, "fakedep", "1.0"),
        "fakedep-1.1": make_wheel(main, "fakedep", "1.1"),
        "leftpad-1.0": make_wheel(main, "leftpad", "1.0", requires=["fakedep<1.1"]),
        "rightpad-1.0": make_wheel(main, "rightpad", "1.0", requires=["fakedep>=1.1"]),
        "flashlike-2.8.3": make_sdist(
            main, "flashlike", "2.8.3", setup_py=FLASHLIKE_SETUP, requires=["torchlike"]
        ),
        "plainsrc-0.1": make_sdist(
            main,
            "plainsrc",
            "0.1",
            pyproject=PLAINSRC_PYPROJECT,
            files={"_build/plainsrc_backend.py": PLAINSRC_BACKEND},
        ),
        "torchlike-2.13.0+cpu": make_wheel(cpu, "torchlike", "2.13.0+cpu", requires=["fakedep>=1.0"]),
        "torchlike-2.13.0+cu128": make_wheel(cu128, "torchlike", "2.13.0+cu128", requires=["fakedep>=1.0"]),
    }
    setuptools = None
    if with_setuptools and (bundled := _bundled_setuptools()):
        setuptools = Path(shutil.copyfile(bundled, main / bundled.name))
    return IndexTree(root=root, main=main, cpu=cpu, cu128=cu128, files=files, setuptools=setuptools)


@contextmanager
def serve_tree(tree: IndexTree) -> Iterator[IndexURLs]:
    """Serve the tree's three folders, each on its own loopback port, for the block."""
    with serve_index(tree.main) as main, serve_index(tree.cpu) as cpu, serve_index(tree.cu128) as cu128:
        yield IndexURLs(main=f"{main}/simple/", cpu=f"{cpu}/simple/", cu128=f"{cu128}/simple/")
