"""Run the resolver (uv) for a lock's target and read what it decided.

uv resolves for a foreign platform from metadata alone.  It runs twice, concurrently, on the same
input: once writing PEP 751 ``pylock.toml`` (each distribution's files for the target, with URLs and
sha256), once writing an annotated requirements file (who required each distribution, and from which
index).  Both runs see one cache, so they decide alike; :func:`envbuild.lock.resolve.resolve` checks
that they did.

Settings pip users already have are honoured: ``PIP_CERT`` becomes uv's ``SSL_CERT_FILE`` (as pip's
``--cert`` wins over ``SSL_CERT_FILE``), else ``SSL_CERT_FILE`` is used as set; ``--native-tls`` adds
the system store; uv reads ``HTTPS_PROXY``/``NO_PROXY`` itself (:data:`PASSED_UV_VARIABLES` lists the
uv settings that pass through).  No user or project ``uv.toml`` is read (``--no-config``), so a
resolution depends on the bundle and the command line only.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from envbuild.compat import tomllib
from envbuild.errors import LockError
from envbuild.lock.target import Target
from envbuild.lock.urls import is_local
from envbuild.models import LOCAL_FOLDER
from envbuild.net import redact_url

_VIA_HEAD = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")
_MARK_BREAK = re.compile(r"\s+\\$")


def uv_binary() -> str:
    """The uv executable: the ``uv`` package envbuild depends on, else one on PATH."""
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        pass
    found = shutil.which("uv")
    if found:
        return found
    raise LockError("the resolver uv is not installed: `pip install uv` (envbuild depends on it)")


@functools.cache
def uv_version(binary: str) -> str:
    proc = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
    words = proc.stdout.split()
    return f"uv {words[1]}" if proc.returncode == 0 and len(words) >= 2 else "uv (unknown version)"


@dataclass(frozen=True)
class Sources:
    """Where the resolver may look: the primary index, extra indexes, find-links folders/URLs."""

    index_urls: tuple[str, ...]  # first is the primary (pip's --index-url); may be empty (--no-index)
    find_links: tuple[str, ...] = ()
    prerelease: bool = False

    def args(self) -> list[str]:
        args: list[str] = []
        if self.index_urls:
            args += ["--index-url", self.index_urls[0]]
            for url in self.index_urls[1:]:
                args += ["--extra-index-url", url]
        else:
            args.append("--no-index")
        for link in self.find_links:
            args += ["--find-links", link]
        if self.prerelease:
            args += ["--prerelease", "allow"]
        return args


def base_command(
    binary: str, target: Target, sources: Sources, constraints: list[Path], from_source: Iterable[str] = ()
) -> list[str]:
    """uv's resolution for ``target``: wheels only, except the sdists of ``from_source`` (a named
    ``--no-binary`` wins over ``--only-binary :all:`` in uv 0.13: only those may be sdists)."""
    command = [
        binary,
        "pip",
        "compile",
        "--quiet",
        "--no-config",
        "--native-tls",
        "--python-version",
        target.python_version,
        "--python-platform",
        target.resolver_platform,
        "--only-binary",
        ":all:",
        # pip merges every index at build time; resolve the same way, or a package the torch index
        # also hosts (numpy, sympy, ...) would be taken from the first index that lists it.
        "--index-strategy",
        "unsafe-best-match",
        *sources.args(),
    ]
    for name in from_source:
        command += ["--no-binary", name]
    for path in constraints:
        command += ["--constraint", str(path)]
    return command


# The user's uv settings that change how uv talks to the network, not what it resolves.  Every other
# UV_* variable (UV_INDEX_URL, UV_CONSTRAINT, ...) is dropped: the bundle and the command line decide.
PASSED_UV_VARIABLES = frozenset(
    {"UV_CACHE_DIR", "UV_HTTP_TIMEOUT", "UV_HTTP_RETRIES", "UV_CONCURRENT_DOWNLOADS", "UV_INSECURE_HOST"}
)


def uv_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UV_") or k in PASSED_UV_VARIABLES}
    env["UV_PYTHON_DOWNLOADS"] = "never"
    env["NO_COLOR"] = "1"
    if env.get("PIP_CERT"):  # pip's own setting wins, as pip's --cert does over SSL_CERT_FILE
        env["SSL_CERT_FILE"] = env["PIP_CERT"]
    return env


@dataclass(frozen=True)
class RawResolution:
    pylock: dict[str, object]
    annotated: str


class ResolverFailed(Exception):
    """uv exited non-zero; ``text`` is its explanation (redacted, trimmed)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def clean_message(stderr: str) -> str:
    lines = [line.rstrip() for line in stderr.splitlines() if line.strip()]
    text = "\n".join(lines)
    return re.sub(r"(https?://)[^/@\s]+@", r"\1***@", text)


def run_uv(command: list[str], input_file: Path, work: Path) -> RawResolution:
    """Run both resolutions of ``input_file`` concurrently; raise :class:`ResolverFailed` on failure."""
    pylock_path = work / "pylock.toml"
    annotated_path = work / "annotated.txt"
    runs = [
        [*command, str(input_file), "--format", "pylock.toml", "--generate-hashes", "-o", str(pylock_path)],
        [*command, str(input_file), "--emit-index-annotation", "--no-header", "-o", str(annotated_path)],
    ]
    env = uv_env()
    procs = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=work)
        for argv in runs
    ]
    outputs = [proc.communicate() for proc in procs]
    for proc, (_out, err) in zip(procs, outputs, strict=True):  # both have ended
        if proc.returncode != 0:
            raise ResolverFailed(clean_message(err) or f"uv exited {proc.returncode} without a message")
    try:
        pylock = tomllib.loads(pylock_path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise LockError(f"the resolver wrote an unreadable pylock.toml: {exc}") from None
    return RawResolution(pylock=pylock, annotated=annotated_path.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Annotation:
    version: str
    via: tuple[str, ...]  # parent distributions and "-r FILE" / "-c FILE" entries
    index: str | None


def parse_annotated(text: str) -> dict[str, Annotation]:
    """``uv pip compile`` requirements output -> canonical name -> (version, via, index)."""
    from packaging.utils import canonicalize_name

    found: dict[str, Annotation] = {}
    name: str | None = None
    version = ""
    via: list[str] = []
    index: str | None = None
    in_via = False

    def flush() -> None:
        if name is not None:
            found[name] = Annotation(version, tuple(via), index)

    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        head = _VIA_HEAD.match(line) if not raw.startswith((" ", "#")) else None
        if head:
            flush()
            name, version = str(canonicalize_name(head.group(1))), head.group(2).rstrip("\\ ").split(";")[0]
            via, index, in_via = [], None, False
            continue
        if not line.startswith("#") or name is None:
            continue
        body = line[1:].strip()
        if body.startswith("via "):
            via.append(body[4:].strip())
            in_via = False
        elif body == "via":
            in_via = True
        elif body.startswith("from "):
            where = body[5:].strip()
            index = LOCAL_FOLDER if is_local(where) else redact_url(where)
            in_via = False
        elif in_via:
            via.append(body)
    flush()
    return found
