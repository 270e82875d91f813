"""Record the package-index responses tests/test_catalog_refresh.py serves on loopback.

    .venv/bin/python scripts/record-index.py [--index-url URL] [--out DIR]

(defaults: https://pypi.org/simple and tests/data/index-recorded)

For each project in KEEP it GETs ``{index}/{project}/`` with ``Accept: application/vnd.pypi.simple.v1+json``
(PEP 691) and stores it as ``pypi/simple/{project}/index.json``, trimmed to the versions in KEEP: the
``files`` entries of other versions are dropped and ``versions`` is cut to the kept ones; the kept
entries are unchanged (their URLs still point at files.pythonhosted.org; the test server rewrites the
host when it serves them).  Then, for every kept torch, torchvision and torchaudio release, it asks for
``<file URL>.metadata`` (PEP 658) of the same wheels ``envbuild catalog refresh`` tries, in the same
order, until one is served, and stores what was served as ``pypi/files/{filename}.metadata``.  Every
request and its HTTP status goes to ``recorded.json``, with the date.

Nothing is written by hand here; the hand-written PyTorch index pages live in the test module.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from envbuild.catalog.index_pages import JSON_ACCEPT, _candidates, parse_project  # noqa: E402
from envbuild.net import USER_AGENT  # noqa: E402

# The trimmed set: what each version exercises is in tests/data/index-recorded/README.md.
KEEP = {
    "torch": ("2.7.1", "2.11.0", "2.12.0", "2.14.0", "2.14.1", "2.15.0"),
    "torchvision": ("0.22.1", "0.26.0", "0.28.0", "0.29.2"),
    "torchaudio": ("2.2.1", "2.11.0", "2.11.1"),
    "triton": ("3.3.1", "3.6.0", "3.7.0", "3.8.0", "3.9.0"),
    "bpy": ("4.5.15", "5.0.1", "5.3.0"),
}


def get(url: str, accept: str) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Accept": accept, "User-Agent": USER_AGENT})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index-url", default="https://pypi.org/simple")
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "data" / "index-recorded")
    args = parser.parse_args()
    index = args.index_url.rstrip("/")
    log: list[dict[str, object]] = []
    (args.out / "pypi" / "files").mkdir(parents=True, exist_ok=True)
    for name, versions in KEEP.items():
        url = f"{index}/{name}/"
        status, body = get(url, JSON_ACCEPT)
        log.append({"url": url, "status": status, "bytes": len(body)})
        if status != 200:
            print(f"{url}: HTTP {status}", file=sys.stderr)
            return 1
        page = json.loads(body)
        page["files"] = [
            f
            for f in page["files"]
            if any(
                f["filename"].startswith(f"{name}-{v}-") or f["filename"].startswith(f"{name}-{v}.")
                for v in versions
            )
        ]
        page["versions"] = [v for v in page.get("versions", []) if v in versions]
        target = args.out / "pypi" / "simple" / name / "index.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(page, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        if name not in ("torch", "torchvision", "torchaudio"):
            continue
        project = parse_project(name, url, json.dumps(page).encode())
        for version in versions:
            for candidate in _candidates(project.releases.get(version, [])):
                meta_url = candidate.url + ".metadata"
                status, body = get(meta_url, "*/*")
                log.append({"url": meta_url, "status": status, "bytes": len(body)})
                if status == 200:
                    (args.out / "pypi" / "files" / (candidate.filename + ".metadata")).write_bytes(body)
                    break
    record = {
        "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "index": index,
        "command": "scripts/record-index.py " + " ".join(sys.argv[1:]),
        "kept": {k: list(v) for k, v in KEEP.items()},
        "requests": log,
    }
    (args.out / "recorded.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    size = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    print(f"recorded {len(log)} responses into {args.out} ({size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
