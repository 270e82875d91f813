"""Time each validation stage on the CPU for a pytorch-cpu-like lock, and torch's collect_env.

    .venv/bin/python bench/validate.py [--python PATH] [--repeat N]

The lock is the one ``envbuild render`` writes for the built-in ``pytorch-cpu`` profile, fitted to
the interpreter under test (its python_executable, and declared packages it does not carry dropped),
so the timings are those of a real, fully passing run.  ``python -m torch.utils.collect_env`` runs
in the same interpreter, for reference: it is what people run today, and it checks far less.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def bench_lock(python: str, workdir: Path) -> Any:
    from envbuild.models import Lock
    from envbuild.plan import check
    from envbuild.profile import load_profile
    from envbuild.render import make_lock

    base = make_lock(check(load_profile("pytorch-cpu")).plan)

    def installed(name: str) -> bool:
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            return False
        return True

    update = {
        "python_executable": python,
        "packages": tuple(p for p in base.packages if installed(p.name)),
        "workdir": str(workdir),
    }
    return Lock.model_validate({**base.model_dump(), **update})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()

    from envbuild.validate import run_validation

    # As in the image (PATH=/opt/venv/bin:$PATH): the profile's pilot check runs `python`.
    os.environ["PATH"] = f"{Path(args.python).parent}{os.pathsep}{os.environ.get('PATH', '')}"

    with tempfile.TemporaryDirectory(prefix="envbuild-bench-") as tmp:
        root = Path(tmp)
        workdir = root / "workspace"
        shutil.copytree(REPO / "profiles" / "apps" / "pilot", workdir)
        lock = bench_lock(args.python, workdir)
        totals: dict[str, list[float]] = {}
        statuses: dict[str, str] = {}
        walls = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            report, _ = run_validation(lock, python=args.python, out=root / "runs", workdir=workdir)
            walls.append(time.perf_counter() - start)
            for s in report.stages:
                totals.setdefault(s.stage, []).append(s.duration_s)
                statuses[s.stage] = s.status
        print(f"envbuild validate on the CPU ({args.python}, {args.repeat} run(s); median seconds)")
        for stage, times in totals.items():
            times.sort()
            print(f"  {stage:<12} {statuses[stage]:<8} {times[len(times) // 2]:8.2f}")
        walls.sort()
        print(f"  {'total':<12} {'ok' if report.ok else 'FAILED':<8} {walls[len(walls) // 2]:8.2f}")

        start = time.perf_counter()
        proc = subprocess.run(
            [args.python, "-m", "torch.utils.collect_env"], capture_output=True, text=True, check=False
        )
        print(
            f"python -m torch.utils.collect_env: {time.perf_counter() - start:.2f} s (exit {proc.returncode})"
        )
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
