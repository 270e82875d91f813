"""Cold-process wall time of ``envbuild check`` and ``envbuild render`` over every built-in profile,
against hpccm's cold render of a comparable recipe measured in the same run.

Each command runs N times in a fresh interpreter (subprocess), the commands interleaved round by round
so that a busy machine slows all of them alike; the median wall time is printed (and the median CPU
time of the process, less sensitive to other load), next to the floor set by the interpreter itself
(``python -c pass``) and by importing the CLI package.

    .venv/bin/python bench/render.py [-n 5] [--hpccm /tmp/hpccm-venv/bin/hpccm]

hpccm (NVIDIA's HPC Container Maker, a recipe -> Dockerfile generator in Python) is the yardstick:
``--hpccm PATH`` or ``ENVBUILD_BENCH_HPCCM=PATH`` names its executable, installed in a venv of its
own (never into envbuild's: it is no dependency of envbuild, its tests or CI):

    python3 -m venv /tmp/hpccm-venv && /tmp/hpccm-venv/bin/pip install hpccm

The recipe (written to a temporary folder) is a CUDA base image, Python, and a pip install of torch and
numpy, as the ``pytorch`` profile is.  Without hpccm only envbuild's figures are printed.

envbuild runs as its installed console script (``.venv/bin/envbuild``), as a user runs it and as
hpccm's is run.  What "cold" means here: a new process each run.  Every process, hpccm's included,
gets its bytecode from one temporary ``PYTHONPYCACHEPREFIX`` filled by a first, unmeasured run -- as
an installed wheel has its ``.pyc`` files -- even where ``PYTHONDONTWRITEBYTECODE`` is set
(``--no-bytecode-cache`` compiles envbuild from source every run instead).  envbuild's cache folder
(``XDG_CACHE_HOME``) is a temporary one, filled by that first run too; the ``empty cache`` rows give
each run a new, empty one (a first start after installing or upgrading).
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


@dataclass
class Command:
    label: str
    argv: list[str]
    fresh_cache: bool = False  # a new, empty XDG_CACHE_HOME for every run
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


def run_once(cmd: Command, env: dict[str, str], scratch: Path, *, record: bool) -> None:
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
        "--no-bytecode-cache",
        action="store_true",
        help="compile envbuild from source in every run (as PYTHONDONTWRITEBYTECODE with no .pyc does)",
    )
    args = parser.parse_args()
    hpccm = find_hpccm(args.hpccm)
    py = sys.executable
    # The installed console script, as a user runs it (and as hpccm's is run); `python -m envbuild` when
    # this interpreter has none (it adds runpy's imports, ~5 ms).
    script = Path(py).parent / "envbuild"
    cli = [str(script)] if script.is_file() and os.access(script, os.X_OK) else [py, "-m", "envbuild"]
    names = builtins()

    with tempfile.TemporaryDirectory(prefix="envbuild-bench-") as tmp_name:
        tmp = Path(tmp_name)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "XDG_CACHE_HOME")}
        env["XDG_CACHE_HOME"] = str(tmp / "xdg")
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
        envbuild_env = dict(env)
        if args.no_bytecode_cache:
            envbuild_env.pop("PYTHONPYCACHEPREFIX")
            envbuild_env["PYTHONDONTWRITEBYTECODE"] = "1"
        commands: list[tuple[Command, dict[str, str]]] = [
            (Command("python -c pass", [py, "-c", "pass"]), envbuild_env),
            (Command("python -c 'import envbuild.cli'", [py, "-c", "import envbuild.cli"]), envbuild_env),
            # the floor under every render: the template engine alone (the design renders with Jinja)
            (Command("python -c 'import jinja2'", [py, "-c", "import jinja2"]), envbuild_env),
        ]
        if hpccm is not None:
            recipe = tmp / "recipe.py"
            recipe.write_text(RECIPE, encoding="utf-8")
            argv = [str(hpccm), "--recipe", str(recipe), "--format", "docker"]
            commands.append((Command("hpccm --recipe recipe.py --format docker", argv), env))
        for name in names:
            out = str(tmp / "out" / name)
            commands.append((Command(f"envbuild check {name}", [*cli, "check", name]), envbuild_env))
            render = [*cli, "render", name, "--out", out, "--force"]
            commands.append((Command(f"envbuild render {name}", render), envbuild_env))
        fresh_out = str(tmp / "out" / "fresh")
        commands += [
            (Command("envbuild check pytorch (empty cache)", [*cli, "check", "pytorch"], True), envbuild_env),
            (
                Command(
                    "envbuild render pytorch (empty cache)",
                    [*cli, "render", "pytorch", "--out", fresh_out, "--force"],
                    True,
                ),
                envbuild_env,
            ),
        ]
        for cmd, cmd_env in commands:  # unmeasured: fills the bytecode and envbuild caches
            run_once(cmd, cmd_env, tmp, record=False)
        for _ in range(args.runs):
            for cmd, cmd_env in commands:
                run_once(cmd, cmd_env, tmp, record=True)
        stages = stage_times(names, envbuild_env)

    width = max(len(cmd.label) for cmd, _ in commands)
    yardstick = next((c for c, _ in commands if c.label.startswith("hpccm")), None)
    base = statistics.median(yardstick.wall) if yardstick else None
    bytecode = "compiled from source every run" if args.no_bytecode_cache else "cached (.pyc)"
    print(
        f"cold-process time, median of {args.runs} runs (Python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs; envbuild bytecode {bytecode}; envbuild run as {' '.join(cli)})"
    )
    header = f"  {'':<{width}}  {'wall':>9}  {'cpu':>9}" + ("  x hpccm" if base else "")
    print(header)
    for cmd, _ in commands:
        wall = statistics.median(cmd.wall)
        line = f"  {cmd.label:<{width}}  {wall * 1000:6.1f} ms  {statistics.median(cmd.cpu) * 1000:6.1f} ms"
        if base:
            line += f"  {wall / base:6.2f}x"
        print(line)
    if base:
        ratio = {c.label: statistics.median(c.wall) / base for c, _ in commands}
        engine = ratio["python -c 'import jinja2'"]

        def span(verb: str) -> str:  # over the built-ins, warm cache (the empty-cache rows are above)
            values = [ratio[f"envbuild {verb} {name}"] for name in names]
            return f"{verb} {min(values):.2f}-{max(values):.2f}x"

        print(
            "ratio to hpccm (wall medians; goal 0.7x, limit 1.0x): "
            f"check pytorch {ratio['envbuild check pytorch']:.2f}x, "
            f"render pytorch {ratio['envbuild render pytorch']:.2f}x; "
            f"over the built-ins {span('check')}, {span('render')}; "
            f"import jinja2 alone {engine:.2f}x"
        )
    else:
        print(f"no hpccm to compare with (--hpccm PATH or ${HPCCM_ENV}); to install it in a venv of its own:")
        print(f"  {INSTALL_HPCCM}")
    print("in one process (import once, then load / check / render each built-in):")
    for label, seconds in stages.items():
        print(f"  {label:<{width}}  {seconds * 1000:6.1f} ms")


if __name__ == "__main__":
    main()
