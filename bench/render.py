"""Cold-process wall time of ``envbuild check`` and ``envbuild render`` over every built-in profile,
against the floor that envbuild's own choice of libraries sets.

The floor of a command is ``python -c "import A, B, ..."`` of the third-party libraries that command
imports, listed from one run of it under ``python -X importtime`` (top-level packages outside the
standard library and envbuild, less what the interpreter imports on its own).  What envbuild adds on
top of the floor -- its own modules, its data, its work -- is the overhead; the budget is 50 % of the
floor (``overhead`` column).  hpccm's cold render of a comparable recipe is a reference row, without a
target.

Each command runs N times in a fresh interpreter (subprocess), the commands interleaved round by round
so that a busy machine slows all of them alike; the median wall time is printed (and the median CPU
time of the process, less sensitive to other load).

    .venv/bin/python bench/render.py [-n 5] [--hpccm /tmp/hpccm-venv/bin/hpccm]

The envbuild measured is the one in this file's checkout (``PYTHONPATH`` is set to it), so a copy of
this file in another checkout (``git archive REV | tar -x -C DIR``) measures that revision with the
same method.

hpccm (NVIDIA's HPC Container Maker, a recipe -> Dockerfile generator in Python) is installed in a venv
of its own (never into envbuild's: it is no dependency of envbuild, its tests or CI); ``--hpccm PATH``
or ``ENVBUILD_BENCH_HPCCM=PATH`` names its executable:

    python3 -m venv /tmp/hpccm-venv && /tmp/hpccm-venv/bin/pip install hpccm

The recipe (written to a temporary folder) is a CUDA base image, Python, and a pip install of torch and
numpy, as the ``pytorch`` profile is.

envbuild runs as ``python -m envbuild``.  What "cold" means here: a new process each run.  Every
process gets its bytecode from one temporary ``PYTHONPYCACHEPREFIX`` filled by a first, unmeasured
run -- as an installed wheel has its ``.pyc`` files.  envbuild's cache folder (``XDG_CACHE_HOME``) is a
temporary one, filled by that first run too; the ``empty cache`` rows give each run a new, empty one (a
first start after installing or upgrading).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HPCCM_ENV = "ENVBUILD_BENCH_HPCCM"
RECIPE = """\
Stage0 += baseimage(image='nvidia/cuda:12.8.1-devel-ubuntu24.04')
Stage0 += python()
Stage0 += pip(packages=['torch==2.7.1', 'numpy'])
"""
INSTALL_HPCCM = (
    "python3 -m venv /tmp/hpccm-venv && /tmp/hpccm-venv/bin/pip install hpccm\n"
    "  then: .venv/bin/python bench/render.py --hpccm /tmp/hpccm-venv/bin/hpccm"
)


def builtins() -> list[str]:
    sys.path.insert(0, str(REPO))
    from envbuild.profile import builtin_names

    return builtin_names()


def imported(argv: list[str], env: dict[str, str]) -> set[str]:
    """Top-level names of the modules ``argv`` (a ``python ...`` command) imports, from -X importtime."""
    proc = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]], cwd=REPO, env=env, capture_output=True, text=True
    )
    return {
        line.rsplit("|", 1)[-1].strip().split(".")[0]
        for line in proc.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def third_party(argv: list[str], env: dict[str, str], startup: set[str]) -> tuple[str, ...]:
    """The third-party libraries ``argv`` imports: not the standard library, not envbuild, and not what
    the interpreter imports on its own (``startup``: site hooks, an editable install's finder)."""
    names = imported(argv, env) - startup - set(sys.stdlib_module_names) - {"envbuild"}
    # a name importtime lists that is not importable here is a failed optional import (copy: Jython)
    return tuple(
        sorted(n for n in names if not n.startswith("_") and importlib.util.find_spec(n) is not None)
    )


@dataclass
class Command:
    label: str
    argv: list[str]
    fresh_cache: bool = False  # a new, empty XDG_CACHE_HOME for every run
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


def run_once(cmd: Command, env: dict[str, str], scratch: Path, *, record: bool) -> None:
    """Run ``cmd`` once; with ``record``, keep its wall and CPU time."""
    if cmd.fresh_cache:
        env = {**env, "XDG_CACHE_HOME": tempfile.mkdtemp(prefix="xdg-", dir=scratch)}
    start = time.perf_counter()
    proc = subprocess.Popen(cmd.argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if hasattr(os, "wait4"):
        assert proc.stderr is not None
        stderr = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        cpu = usage.ru_utime + usage.ru_stime
    else:  # pragma: no cover - not POSIX
        stderr = proc.communicate()[1]
        cpu = float("nan")
    wall = time.perf_counter() - start
    if proc.stderr is not None:
        proc.stderr.close()
    if proc.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd.argv)} failed ({proc.returncode}): {stderr.decode()[-500:]}")
    if record:
        cmd.wall.append(wall)
        cmd.cpu.append(cpu)


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


def stage_times(names: list[str], env: dict[str, str]) -> dict[str, float]:
    """Seconds per stage inside one cold process (first call of each stage pays its warm-up)."""
    proc = subprocess.run(
        [sys.executable, "-c", STAGES, *names], cwd=REPO, env=env, capture_output=True, check=True
    )
    times: dict[str, float] = json.loads(proc.stdout)
    return times


def find_hpccm(arg: str | None) -> Path | None:
    value = arg or os.environ.get(HPCCM_ENV)
    if not value:
        return None
    path = Path(value).expanduser()
    if not (path.is_file() and os.access(path, os.X_OK)):
        sys.exit(f"hpccm: {path} is not an executable file; install it with:\n  {INSTALL_HPCCM}")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", "--runs", type=int, default=5, help="runs per command (median reported)")
    parser.add_argument(
        "--hpccm",
        metavar="PATH",
        help=f"hpccm's executable, in a venv of its own (default: ${HPCCM_ENV})",
    )
    parser.add_argument(
        "--profiles", nargs="*", metavar="NAME", help="built-in profiles to measure (default: every one)"
    )
    args = parser.parse_args()
    hpccm = find_hpccm(args.hpccm)
    py = sys.executable
    cli = [py, "-m", "envbuild"]
    names = args.profiles or builtins()

    with tempfile.TemporaryDirectory(prefix="envbuild-bench-") as tmp_name:
        tmp = Path(tmp_name)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "XDG_CACHE_HOME")}
        env["XDG_CACHE_HOME"] = str(tmp / "xdg")
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
        env["PYTHONPATH"] = str(REPO)  # the envbuild of this checkout, whatever is installed
        env.pop("NO_COLOR", None)
        startup = imported([py, "-c", "pass"], env)
        commands: list[Command] = [Command("python -c pass", [py, "-c", "pass"])]
        floors: dict[str, str] = {}  # command label -> label of its floor row
        measured: list[Command] = []
        for name in names:
            out = str(tmp / "out" / name)
            for verb, extra in (("check", []), ("render", ["--out", out, "--force"])):
                cmd = Command(f"envbuild {verb} {name}", [*cli, verb, name, *extra])
                run_once(cmd, env, tmp, record=False)  # fills the caches before importtime looks
                libs = third_party(cmd.argv, env, startup)
                label = f"python -c 'import {', '.join(libs)}'" if libs else "python -c pass"
                if all(c.label != label for c in commands):
                    commands.append(
                        Command(label, [py, "-c", f"import {', '.join(libs)}" if libs else "pass"])
                    )
                floors[cmd.label] = label
                measured.append(cmd)
        fresh_out = str(tmp / "out" / "fresh")
        for verb, extra in (("check", []), ("render", ["--out", fresh_out, "--force"])):
            if "pytorch" in names:
                label = f"envbuild {verb} pytorch (empty cache)"
                measured.append(Command(label, [*cli, verb, "pytorch", *extra], fresh_cache=True))
                floors[label] = floors[f"envbuild {verb} pytorch"]
        commands += measured
        if hpccm is not None:
            recipe = tmp / "recipe.py"
            recipe.write_text(RECIPE, encoding="utf-8")
            argv = [str(hpccm), "--recipe", str(recipe), "--format", "docker"]
            commands.append(Command("hpccm --recipe recipe.py --format docker (reference)", argv))
        hpccm_env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
        for cmd in commands:  # unmeasured: fills the bytecode and envbuild caches
            run_once(cmd, hpccm_env if cmd.label.startswith("hpccm") else env, tmp, record=False)
        for _ in range(args.runs):
            for cmd in commands:
                run_once(cmd, hpccm_env if cmd.label.startswith("hpccm") else env, tmp, record=True)
        stages = stage_times(names, env)

    width = max(len(cmd.label) for cmd in commands)
    median = {cmd.label: statistics.median(cmd.wall) for cmd in commands}
    print(
        f"cold-process time, median of {args.runs} runs (Python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs; bytecode cached; envbuild from {REPO}, run as python -m envbuild)"
    )
    print(f"  {'':<{width}}  {'wall':>9}  {'cpu':>9}  overhead over the floor (budget 50 %)")
    for cmd in commands:
        cpu = statistics.median(cmd.cpu)
        line = f"  {cmd.label:<{width}}  {median[cmd.label] * 1000:6.1f} ms  {cpu * 1000:6.1f} ms"
        floor = floors.get(cmd.label)
        if floor is not None:
            over = median[cmd.label] / median[floor] - 1
            line += f"  {over * 100:+5.0f} %{'' if over <= 0.5 else '  OVER BUDGET'}"
        print(line)
    overheads = [median[label] / median[floor] - 1 for label, floor in floors.items() if "empty" not in label]
    for verb in ("check", "render"):
        values = [median[f"envbuild {verb} {n}"] / median[floors[f"envbuild {verb} {n}"]] - 1 for n in names]
        print(
            f"{verb}: overhead over its floor {min(values) * 100:.0f} to {max(values) * 100:.0f} % "
            "over the built-ins"
        )
    print(f"worst (warm cache): {max(overheads) * 100:.0f} % (budget 50 %)")
    if hpccm is None:
        print(f"no hpccm reference row (--hpccm PATH or ${HPCCM_ENV}); to install it in a venv of its own:")
        print(f"  {INSTALL_HPCCM}")
    print("in one process (import once, then load / check / render each built-in):")
    for label, seconds in stages.items():
        print(f"  {label:<{width}}  {seconds * 1000:6.1f} ms")


if __name__ == "__main__":
    main()
