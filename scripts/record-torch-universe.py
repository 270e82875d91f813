#!/usr/bin/env python3
"""Record the metadata of the distributions torch brings in, from the real package index.

    .venv/bin/python scripts/record-torch-universe.py

For each root requirement (ROOTS), `uv pip compile` resolves against https://pypi.org/simple for CPython
3.12 on x86_64-manylinux_2_39 (the pytorch profile's Ubuntu 24.04 target); for every distribution of
those resolutions the script reads the METADATA file of the wheel uv chose (the PEP 658 ``.metadata``
file when pypi.org serves it, else the member ``*.dist-info/METADATA`` read out of the remote wheel with
HTTP range requests, as pip and uv do) and writes it unchanged to
tests/data/index-recorded/torch-universe/<wheel file name>.metadata.  recorded.json keeps the time,
the command, every wheel's URL and sha256, and the resolutions.

tests/torch_universe.py serves these metadata files on loopback, in small stand-in wheels of the same
file names, so `uv` resolves torch's real dependency graph (nvidia-*, cuda-toolkit, triton) offline.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

import tomllib
from packaging.tags import Tag
from packaging.utils import parse_wheel_filename

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "index-recorded" / "torch-universe"
INDEX = "https://pypi.org/simple"
PYTHON, PLATFORM = "3.12", "x86_64-manylinux_2_39"
ROOTS = ["torch==2.15.0", "torch==2.14.0", "torch==2.14.1"]


def wanted(filename: str) -> int:
    """Rank of a wheel for cp312 / manylinux x86_64 (lower is better; 99: not installable)."""
    tags: frozenset[Tag] = parse_wheel_filename(filename)[3]
    for tag in tags:
        if tag.interpreter in ("cp312", "py3") and (
            tag.platform == "any"
            or (tag.platform.startswith("manylinux") and tag.platform.endswith("x86_64"))
        ):
            return 0 if tag.interpreter == "cp312" else 1
    return 99


class RangeFile(io.RawIOBase):
    """A remote file read with HTTP range requests (enough for zipfile to find one member)."""

    def __init__(self, url: str) -> None:
        self.url = url
        head = urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=60)
        self.size = int(head.headers["Content-Length"])
        self.pos = 0

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = {0: offset, 1: self.pos + offset, 2: self.size + offset}[whence]
        return self.pos

    def read(self, n: int = -1) -> bytes:
        end = self.size if n < 0 else min(self.size, self.pos + n)
        if end <= self.pos:
            return b""
        request = urllib.request.Request(self.url, headers={"Range": f"bytes={self.pos}-{end - 1}"})
        data = urllib.request.urlopen(request, timeout=120).read()
        self.pos += len(data)
        return data


def metadata_of(url: str) -> tuple[bytes, str]:
    try:
        return urllib.request.urlopen(url + ".metadata", timeout=60).read(), "PEP 658 .metadata"
    except urllib.error.HTTPError as exc:
        if exc.code != 404:
            raise
    with zipfile.ZipFile(RangeFile(url)) as archive:
        (member,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1]
        return archive.read(member), f"range requests ({member})"


def main() -> int:
    from uv import find_uv_bin

    OUT.mkdir(parents=True, exist_ok=True)
    uv = str(find_uv_bin())
    resolutions: dict[str, list[str]] = {}
    wheels: dict[str, dict[str, str]] = {}
    for root in ROOTS:
        with tempfile.TemporaryDirectory() as tmp:
            req = Path(tmp) / "in.txt"
            req.write_text(root + "\n")
            out = Path(tmp) / "pylock.toml"
            command = [
                uv,
                "pip",
                "compile",
                str(req),
                "--format",
                "pylock.toml",
                "-o",
                str(out),
                "--no-config",
                "--python-version",
                PYTHON,
                "--python-platform",
                PLATFORM,
                "--index-url",
                INDEX,
                "--only-binary",
                ":all:",
                "--no-header",
                "-q",
            ]
            subprocess.run(command, check=True)
            lock = tomllib.loads(out.read_text())
        names = []
        for package in lock["packages"]:
            entries = [(w.get("name") or w["url"].rsplit("/", 1)[-1], w) for w in package.get("wheels", [])]
            ranked = sorted((wanted(n), n, w) for n, w in entries)
            rank, name, wheel = ranked[0]
            name = urllib.parse.unquote(name)
            assert rank < 99, package["name"]
            names.append(f"{package['name']}=={package['version']}")
            wheels[name] = {"url": wheel["url"], "sha256": wheel["hashes"]["sha256"]}
        resolutions[root] = names
    for name, info in sorted(wheels.items()):
        path = OUT / f"{name}.metadata"
        if path.exists():
            info["metadata_from"] = "kept from an earlier run"
            continue
        data, how = metadata_of(info["url"])
        path.write_bytes(data)
        info["metadata_from"] = how
        print(f"{name}: {how}", file=sys.stderr)
    record = {
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": "scripts/record-torch-universe.py",
        "index": INDEX,
        "python": PYTHON,
        "platform": PLATFORM,
        "resolutions": resolutions,
        "wheels": wheels,
    }
    (OUT / "recorded.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
