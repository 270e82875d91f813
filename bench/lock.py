"""Wall time of ``envbuild lock`` for the pytorch-cpu bundle, with a cold and a warm resolver cache.

Each run is a fresh process (``envbuild lock BUNDLE ...``) on a freshly rendered bundle.  "cold" gives
uv an empty cache folder (every index page and wheel's metadata is fetched); "warm" runs again with
the cache the cold run filled (the median of N runs).  Prints the number of distributions locked and
the locked list.

The PyTorch index is unreachable from these machines, so by default PyPI plus the CPU torch file on
disk stand in for it (the same sources the end-to-end test uses):

    .venv/bin/python bench/lock.py [-n 5] [--index-url URL]... [--find-links DIR]...
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ENVBUILD = [sys.executable, "-m", "envbuild"]


def run(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, env=env, check=False)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=5, help="warm runs (median)")
    parser.add_argument("--index-url", action="append", default=None)
    parser.add_argument("--find-links", action="append", default=None)
    args = parser.parse_args()
    indexes = args.index_url or ["https://pypi.org/simple"]
    links = args.find_links if args.find_links is not None else ["/opt/wheels"]
    sources = [w for url in indexes for w in ("--index-url", url)]
    sources += [w for link in links for w in ("--find-links", link)]
    with tempfile.TemporaryDirectory(prefix="envbuild-bench-lock-") as tmp:
        root = Path(tmp)
        env = {**os.environ, "UV_CACHE_DIR": str(root / "uv-cache")}
        bundle = root / "pytorch-cpu"
        run([*ENVBUILD, "render", "pytorch-cpu", "--out", str(bundle)], env)
        pristine = {
            name: (bundle / name).read_bytes() for name in ("requirements-rebuild.txt", "envbuild.lock.json")
        }

        def fresh() -> None:
            for name, data in pristine.items():
                (bundle / name).write_bytes(data)

        cold = run([*ENVBUILD, "lock", str(bundle), *sources], env)
        first = (bundle / "requirements-rebuild.txt").read_bytes()
        warm = []
        for _ in range(args.n):
            fresh()
            warm.append(run([*ENVBUILD, "lock", str(bundle), *sources], env))
        same = (bundle / "requirements-rebuild.txt").read_bytes() == first
        lock = json.loads((bundle / "envbuild.lock.json").read_text())
    dists = lock["distributions"]
    print(f"envbuild lock pytorch-cpu ({lock['resolution']['resolver']}, {lock['resolution']['platform']})")
    print(f"  sources: {' '.join(sources)}")
    print(f"  cold cache: {cold:6.2f} s")
    print(f"  warm cache: {statistics.median(warm):6.2f} s (median of {args.n}; min {min(warm):.2f} s)")
    print(f"  distributions locked: {len(dists)}; warm runs byte-identical to the cold one: {same}")
    for dist in dists:
        spec = f"{dist['name']}=={dist['version']}" + (f"+{dist['local']}" if dist["local"] else "")
        via = ", ".join(dist["declared_by"] + dist["required_by"])
        print(f"    {spec:32} {via}")


if __name__ == "__main__":
    main()
