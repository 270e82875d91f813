"""Speed of the secret policy's content scan (envbuild.secrets.content_reason), which every app file,
bundle file and build-context file goes through: MiB/s on random bytes and on text dense with the
prefixes of every value format (the worst case for the prefix search), at 1, 4 and 16 MiB so that the
growth is visible (linear: MiB/s stays flat).

    .venv/bin/python bench/secret_scan.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from envbuild.secrets import content_reason

CHUNK = b"import x  # https://pytorch.org/docs sk- hf_ ghp_ eyJ AKIA :// -----BEGIN \n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"content scan, median of {args.repeat} (Python {sys.version.split()[0]})")
    for mib in (1, 4, 16):
        size = mib << 20
        for label, data in (
            ("random bytes", secrets.token_bytes(size)),
            ("prefix-dense text", CHUNK * (size // len(CHUNK))),
        ):
            times = []
            for _ in range(args.repeat):
                started = time.perf_counter()
                assert content_reason(data) is None
                times.append(time.perf_counter() - started)
            median = statistics.median(times)
            print(f"  {mib:2d} MiB {label:18} {median * 1000:8.1f} ms  {mib / median:8.1f} MiB/s")


if __name__ == "__main__":
    main()
