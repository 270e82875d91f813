"""Time each validation stage on the CPU for a pytorch-cpu-like lock, and torch's collect_env.

    .venv/bin/python bench/validate.py [--python PATH] [--repeat N]
    .venv/bin/python bench/validate.py --performance SECONDS   # the performance stage alone (issue 28)
    .venv/bin/python bench/validate.py --arrival [--repeat N]  # the extensions stage on arrival (issue 27)

The lock is the one ``envbuild render`` writes for the built-in ``pytorch-cpu`` profile, fitted to
the interpreter under test (its python_executable, and declared packages it does not carry dropped),
so the timings are those of a real, fully passing run.  ``python -m torch.utils.collect_env`` runs
in the same interpreter, for reference: it is what people run today, and it checks far less.

The cache (XDG_CACHE_HOME) is a fresh folder: a first, cold run builds the C++ extension into it;
the runs timed after it are second runs on the same machine, which load the built extension.  Goal
(issue 24 item 7): a second full run takes at most 2.5x collect_env.

``--arrival`` times the extensions stage as a renter meets it, each run with an empty cache (a fresh
container): with the ops compiled on arrival (a lock without ops built with the image, as before issue
27), and with the ops built the way the image's builder stage builds them (``envbuild-probe-ops.py``,
timed too) and only loaded and run.  Goal (issue 27 item 6): at most 5 s on 2 CPUs.
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

from envbuild.boundary import parse, to_data

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
    return parse(Lock, {**to_data(base), **update})


EXT_ARGS = {"backend": "cpu", "compile": True, "extensions": []}


def wall(run: Any) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def median(values: list[float]) -> float:
    values = sorted(values)
    return values[len(values) // 2]


def performance(python: str, budget: float) -> int:
    """The performance stage on the CPU (``--stages performance``): its wall time and every figure."""
    from envbuild.validate import run_validation

    with tempfile.TemporaryDirectory(prefix="envbuild-bench-") as tmp:
        root = Path(tmp)
        lock = bench_lock(python, root)
        start = time.perf_counter()
        report, _ = run_validation(
            lock, python=python, out=root / "runs", workdir=root, stages=["performance"], perf_budget=budget
        )
        total = time.perf_counter() - start
    stage = next(s for s in report.stages if s.stage == "performance")
    print(f"performance stage on the CPU ({python}, budget {budget:g} s): {stage.status}")
    print(f"  stage {stage.duration_s:6.2f} s, whole run with its prerequisites {total:6.2f} s")
    for f in stage.facts.get("figures", []):
        print(f"  {f['figure']:<18} {f['where']:<22} {f['measured']:>10g} {f['unit']}")
    for s in (stage.facts.get("collectives") or {}).get("sizes", []):
        print(
            f"  all-reduce gloo x2 {s['bytes']:>10} B algbw {s['algbw_gbs']:g} busbw {s['busbw_gbs']:g} GB/s"
        )
    return 0 if stage.status == "passed" else 1


def arrival(python: str, repeat: int) -> int:
    """The extensions stage with an empty cache each run: compiled on arrival, then built beforehand."""
    from dataclasses import replace

    from envbuild.validate import run_validation
    from envbuild.validate.probe import PROBES_DIR

    def stage_seconds(lock: Any, root: Path, label: str) -> list[float]:
        times = []
        for i in range(repeat):
            os.environ["XDG_CACHE_HOME"] = str(root / f"cache-{label}-{i}")  # empty: a fresh container
            report, _ = run_validation(lock, python=python, out=root / f"{label}-{i}", stages=["extensions"])
            stage = report.stage("extensions")
            assert stage.status == "passed", stage.facts
            times.append(stage.duration_s)
        return times

    with tempfile.TemporaryDirectory(prefix="envbuild-bench-") as tmp:
        root = Path(tmp)
        lock = bench_lock(python, root)
        before = replace(lock, probe_ops=(), compile_extensions=True)  # what a lock said before issue 27
        compiled = stage_seconds(before, root, "compiled")
        start = time.perf_counter()
        subprocess.run([python, str(PROBES_DIR / "_probe_ops.py"), "build", str(root / "ops")], check=True)
        built = time.perf_counter() - start
        loaded = stage_seconds(replace(lock, probe_ops_dir=str(root / "ops")), root, "image")
    print(f"the extensions stage on arrival, empty cache each run ({python}, {os.cpu_count()} CPUs)")
    print(f"  compiled on arrival       median {median(compiled):6.2f} s  (runs: {compiled})")
    print(f"  built beforehand          {built:6.2f} s  (envbuild-probe-ops.py, as in the builder stage)")
    print(f"  built with the image      median {median(loaded):6.2f} s  (runs: {loaded}; goal <= 5 s)")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument(
        "--performance", type=float, metavar="SECONDS", help="time the performance stage with this budget"
    )
    parser.add_argument("--arrival", action="store_true", help="time the extensions stage on arrival")
    args = parser.parse_args()
    if args.arrival:
        return arrival(args.python, args.repeat)
    if args.performance is not None:
        return performance(args.python, args.performance)

    from envbuild.validate import run_validation
    from envbuild.validate.probe import run_probe
    from envbuild.validate.stage_runners import extension_cache_dir
    from envbuild.validate.stages import STAGE_NAMES

    # As in the image (PATH=/opt/venv/bin:$PATH): the profile's pilot check runs `python`.
    os.environ["PATH"] = f"{Path(args.python).parent}{os.pathsep}{os.environ.get('PATH', '')}"

    with tempfile.TemporaryDirectory(prefix="envbuild-bench-") as tmp:
        root = Path(tmp)
        os.environ["XDG_CACHE_HOME"] = str(root / "cache")  # the extension cache starts empty
        workdir = root / "workspace"
        shutil.copytree(REPO / "profiles" / "apps" / "pilot", workdir)
        lock = bench_lock(args.python, workdir)
        no_ext = [s for s in STAGE_NAMES if s != "extensions"]
        totals: dict[str, list[float]] = {}
        statuses: dict[str, str] = {}
        walls, walls_no_ext, ext_alone, collect = [], [], [], []
        first = time.perf_counter()
        report, _ = run_validation(lock, python=args.python, out=root / "first", workdir=workdir)
        first_wall, ok = time.perf_counter() - first, report.ok
        ext_args = {**EXT_ARGS, "cache_dir": extension_cache_dir()}
        for i in range(args.repeat):
            start = time.perf_counter()
            report, _ = run_validation(lock, python=args.python, out=root / f"runs-{i}", workdir=workdir)
            walls.append(time.perf_counter() - start)
            ok = ok and report.ok
            for s in report.stages:
                totals.setdefault(s.stage, []).append(s.duration_s)
                statuses[s.stage] = s.status
            walls_no_ext.append(
                wall(
                    lambda: run_validation(
                        lock, python=args.python, out=root / "ne", workdir=workdir, stages=no_ext
                    )
                )
            )
            ext_alone.append(wall(lambda: run_probe(args.python, "extensions", ext_args, 1200)))
            collect.append(
                wall(
                    lambda: subprocess.run(
                        [args.python, "-m", "torch.utils.collect_env"], capture_output=True, check=False
                    )
                )
            )
        print(f"envbuild validate on the CPU ({args.python}, {args.repeat} run(s); median seconds)")
        print(f"  first run (cold cache: builds the extension) {first_wall:6.2f} s")
        print("  second runs, per stage (stages run concurrently, so these overlap):")
        for stage, times in totals.items():
            print(f"    {stage:<12} {statuses[stage]:<8} {median(times):8.2f}")
        w, wn, e, c = median(walls), median(walls_no_ext), median(ext_alone), median(collect)
        print(f"  whole ladder, second run      {w:6.2f} s  ({'ok' if ok else 'FAILED'})")
        print(f"  ladder without extensions     {wn:6.2f} s")
        print(f"  extension load + run alone    {e:6.2f} s  (the extensions probe on its own, cached)")
        print(f"  python -m torch.utils.collect_env {c:6.2f} s")
        print(f"  ratio: second full run / collect_env           = {w / c:.2f} (goal <= 2.5)")
        print(f"  ratio: ladder without extensions / collect_env = {wn / c:.2f} (goal <= 2.0)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
