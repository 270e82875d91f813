"""Cold-process wall time of ``envbuild check`` and ``envbuild render`` over every built-in profile.

Each command runs N times in a fresh interpreter (subprocess); the median is printed next to the
floor set by the interpreter itself (``python -c pass``) and by importing the CLI package.

    .venv/bin/python bench/render.py [-n 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def builtins() -> list[str]:
    sys.path.insert(0, str(REPO))
    from envbuild.profile import builtin_names

    return builtin_names()


def median_seconds(argv: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(argv, cwd=REPO, capture_output=True, check=False)
        times.append(time.perf_counter() - start)
        if proc.returncode not in (0, 1):
            sys.exit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.decode()[-500:]}")
    return statistics.median(times)


STAGES = """
import json, sys, tempfile, time
from pathlib import Path
t0 = time.perf_counter()
from envbuild.plan import check
from envbuild.profile import load_profile
from envbuild.render import render_bundle
out = {"import": time.perf_counter() - t0}
tmp = Path(tempfile.mkdtemp(prefix="envbuild-bench-"))
for name in sys.argv[1:]:
    t = time.perf_counter(); profile = load_profile(name); out["load " + name] = time.perf_counter() - t
    t = time.perf_counter(); result = check(profile); out["check " + name] = time.perf_counter() - t
    t = time.perf_counter(); render_bundle(result, tmp / name, command="bench", force=True)
    out["render " + name] = time.perf_counter() - t
print(json.dumps(out))
"""


def stage_times(names: list[str]) -> dict[str, float]:
    """Seconds per stage inside one cold process (first call of each stage pays its warm-up)."""
    import json

    proc = subprocess.run([sys.executable, "-c", STAGES, *names], cwd=REPO, capture_output=True, check=True)
    times: dict[str, float] = json.loads(proc.stdout)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", "--runs", type=int, default=5, help="runs per command (median reported)")
    args = parser.parse_args()
    py = sys.executable
    cli = [py, "-m", "envbuild"]
    rows: list[tuple[str, float]] = [
        ("python -c pass", median_seconds([py, "-c", "pass"], args.runs)),
        ("python -c 'import envbuild.cli'", median_seconds([py, "-c", "import envbuild.cli"], args.runs)),
    ]
    with tempfile.TemporaryDirectory(prefix="envbuild-bench-") as tmp:
        for name in builtins():
            rows.append((f"envbuild check {name}", median_seconds([*cli, "check", name], args.runs)))
            out = str(Path(tmp) / name)
            rows.append(
                (
                    f"envbuild render {name}",
                    median_seconds([*cli, "render", name, "--out", out, "--force"], args.runs),
                )
            )
    width = max(len(label) for label, _ in rows)
    print(f"cold-process wall time, median of {args.runs} runs ({sys.version.split()[0]})")
    for label, seconds in rows:
        print(f"  {label:<{width}}  {seconds * 1000:7.1f} ms")
    print("in one process (import once, then load / check / render each built-in):")
    for label, seconds in stage_times(builtins()).items():
        print(f"  {label:<{width}}  {seconds * 1000:7.1f} ms")


if __name__ == "__main__":
    main()
