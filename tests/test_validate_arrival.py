"""Validating the machine actually received: a bundle folder as ``--lock``, an interpreter that is not
the image's ``/opt/venv`` (``--python``), another ``python`` first on PATH, checks run with the
interpreter under test, and ``--keep-going`` running every stage whose facts are there.

Real ``envbuild render`` bundles, real probe processes, the real torch 2.13.0+cpu of this test venv.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import replace
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from cli_support import envbuild
from validate_support import cpu_lock

from envbuild.errors import UsageError
from envbuild.models import CheckSpec, LockPackage
from envbuild.report.verify import verify_report
from envbuild.untrusted import markdown
from envbuild.validate import exit_code, interp, run_validation

REPO = Path(__file__).resolve().parent.parent
PILOT_APP = REPO / "profiles" / "apps" / "pilot"
VENV_PYTHON = Path(sys.executable)  # this test venv's python, not resolved (that would leave the venv)
IMPOSTOR = "#!/bin/sh\necho 'impostor python: not the interpreter under test' >&2\nexit 97\n"


def _envbuild(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return envbuild(*args, cwd=cwd, env=env, timeout=600)


def _render(tmp_path: Path, profile: str = "pytorch-cpu") -> Path:
    bundle = tmp_path / "bundle"
    proc = _envbuild("render", profile, "--target", "cpu", "--out", str(bundle), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return bundle


def _impostor_path(tmp_path: Path) -> dict[str, str]:
    """The environment of a shell where ``python`` / ``python3`` / ``python3.11`` are another program
    (here one that fails loudly), first on PATH, and this venv's bin folder is not on PATH at all."""
    folder = tmp_path / "impostor"
    folder.mkdir()
    for name in ("python", "python3", "python3.11"):
        (folder / name).write_text(IMPOSTOR, encoding="utf-8")
        (folder / name).chmod(0o755)
    rest = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != str(VENV_PYTHON.parent)]
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    return {**env, "PATH": os.pathsep.join([str(folder), *rest])}


def _stages(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["stage"]: s for s in report["stages"]}


def _os_is_the_locks() -> bool:
    release = platform.freedesktop_os_release()
    return (release.get("ID"), release.get("VERSION_ID")) == ("debian", "12")


def test_a_venv_outside_the_image_validates_with_the_bundle(tmp_path: Path) -> None:
    """The renter's situation of issue 8, with the documented command.

    Proves, for the built-in ``pytorch-cpu`` bundle rendered into a tmp folder and this test venv
    standing in for "a venv rebuilt from requirements-rebuild.txt" (it lives outside /opt/venv and has
    torch 2.13.0+cpu), run from the bundle folder as the README says
    (``envbuild validate --lock . --python <relative path> --workdir app --keep-going``), with a
    failing impostor ``python`` / ``python3`` first on PATH and this venv's bin folder not on PATH:

    - the interpreter stage passes (same Python 3.11, CPython): the prefix that is not /opt/venv and the
      impostor on PATH are warnings in its facts and hint, not failures;
    - the packages stage compares honestly: this venv has no numpy, which the bundle declares
      (numpy==2.2.6), so it fails naming exactly that (it passes if numpy 2.2.6 is installed);
    - with --keep-going that failure does not stop the pilot check, which runs in ``app/`` with this
      venv's python as argv[0] and its bin folder first on PATH, and passes (the impostor would exit 97);
    - the os stage decides on this machine's real OS (the lock says Debian 12).
    """
    bundle = _render(tmp_path)
    env = _impostor_path(tmp_path)
    python = os.path.relpath(VENV_PYTHON, bundle)
    stages = "interpreter,os,packages,checks"
    proc = _envbuild(
        "validate", "--lock", ".", "--python", python, "--workdir", "app", "--keep-going",
        "--stages", stages, "--out", str(tmp_path / "runs"), "--json",
        cwd=bundle, env=env,
    )  # fmt: skip
    assert "Traceback" not in proc.stderr, proc.stderr
    report = json.loads(proc.stdout)["report"]
    got = _stages(report)
    assert list(got) == stages.split(",")

    interpreter = got["interpreter"]
    assert interpreter["status"] == "passed", interpreter
    facts = interpreter["facts"]
    assert facts["executable"] == str(VENV_PYTHON) and facts["prefix"] == sys.prefix
    assert facts["kind"] == "venv" and facts["chosen_by"] == "--python"
    assert facts["implementation_tag"] == "cp" and facts["lock_prefix"] == "/opt/venv"
    assert facts["on_path"]["python"] == {
        "path": str(tmp_path / "impostor" / "python"),
        "realpath": str(tmp_path / "impostor" / "python"),
        "is_under_test": False,
    }
    assert facts["warnings"][0] == (
        f"validating {VENV_PYTHON} (prefix {sys.prefix}, chosen by --python), not the lock's environment "
        "/opt/venv (/opt/venv/bin/python is not here)"
    )
    assert facts["warnings"][1].startswith(f"`python`, `python3` on PATH: {tmp_path / 'impostor'}, not the")
    assert interpreter["hint"] == "; ".join(facts["warnings"])

    assert got["os"]["status"] == ("passed" if _os_is_the_locks() else "failed")

    packages = got["packages"]
    try:
        numpy = metadata.version("numpy")
    except metadata.PackageNotFoundError:
        numpy = None
    assert packages["facts"]["declared_installed"] == {"torch": metadata.version("torch"), "numpy": numpy}
    assert packages["facts"]["broken"] == []
    if numpy == "2.2.6":
        assert packages["status"] == "passed"
    else:
        wanted = f"numpy: declared 2.2.6, {'installed ' + numpy if numpy else 'not installed'}"
        assert packages["status"] == "failed" and packages["error"] == f"1 package problem: {wanted}"

    checks = got["checks"]
    assert checks["status"] == "passed", checks
    (pilot,) = checks["facts"]["checks"]
    assert pilot["name"] == "pilot" and pilot["returncode"] == 0
    assert pilot["argv"] == [str(VENV_PYTHON), "src/pilot.py", "--config", "config/pilot.json"]
    assert checks["facts"]["path_first"] == str(VENV_PYTHON.parent)
    assert checks["facts"]["workdir"] == str((bundle / "app").resolve())
    assert (
        json.loads((bundle / "app" / "runs" / "pilot" / "summary.json").read_text())["counts"]["total"] == 12
    )

    assert report["python"] == str(VENV_PYTHON) and report["workdir"] == str((bundle / "app").resolve())
    assert report["lock"]["path"] == str((bundle / "envbuild.lock.json").resolve())  # absolute
    ok = got["os"]["status"] == packages["status"] == "passed"
    assert proc.returncode == (0 if ok else 1)
    assert report["stage_reached"] == "checks"
    (run_dir,) = list((tmp_path / "runs").iterdir())
    assert verify_report(run_dir) == []
    md = (run_dir / "report.md").read_text(encoding="utf-8")
    # machine text is Markdown-escaped in report.md (envbuild.untrusted.markdown: `_` as `\_`)
    assert f"- environment: venv at {markdown(sys.prefix)}, chosen by --python" in md
    impostor = markdown(f"{tmp_path / 'impostor' / 'python'} (NOT the interpreter under test)")
    assert f"- `python` on PATH: {impostor}" in md


def test_a_profile_matching_the_venv_passes_end_to_end(tmp_path: Path) -> None:
    """The same situation with a profile that declares what this venv holds (torch 2.13.0+cpu only):
    ``--lock BUNDLE`` from another folder, no --workdir (the bundle's app/ is the default), an
    impostor python first on PATH: interpreter, packages and the pilot check pass, exit 0."""
    profile_dir = tmp_path / "profile"
    shutil.copytree(PILOT_APP, profile_dir / "apps" / "pilot")
    text = (REPO / "profiles" / "pytorch-cpu.toml").read_text(encoding="utf-8")
    assert 'packages = ["numpy==2.2.6"]' in text
    text = text.replace('packages = ["numpy==2.2.6"]', "packages = []").replace(
        'name = "pytorch-cpu"', 'name = "arrival-cpu"'
    )
    (profile_dir / "arrival-cpu.toml").write_text(text, encoding="utf-8")
    bundle = _render(tmp_path, str(profile_dir / "arrival-cpu.toml"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = _envbuild(
        "validate", "--lock", str(bundle), "--python", str(VENV_PYTHON),
        "--stages", "interpreter,packages,checks", "--out", str(tmp_path / "runs"), "--json",
        cwd=elsewhere, env=_impostor_path(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)["report"]
    assert {s["stage"]: s["status"] for s in report["stages"]} == {
        "interpreter": "passed",
        "packages": "passed",
        "checks": "passed",
    }
    assert report["workdir"] == str((bundle / "app").resolve())
    assert report["lock"]["path"] == str(bundle / "envbuild.lock.json")
    assert "lock " + str(bundle / "envbuild.lock.json") in proc.stderr


# -- --lock and where the lock is looked for ----------------------------------------------------------


def test_lock_accepts_a_bundle_folder_and_defaults_the_workdir_to_its_app(tmp_path: Path) -> None:
    bundle = _render(tmp_path)
    report, _ = run_validation(bundle, python=str(VENV_PYTHON), out=tmp_path / "runs", stages=["os"])
    assert report.lock.path == str(bundle / "envbuild.lock.json")
    assert report.workdir == str((bundle / "app").resolve())
    where = interp.find_lock(bundle / "envbuild.lock.json")  # the file inside a bundle: same bundle
    assert where == interp.LockLocation(bundle / "envbuild.lock.json", bundle)
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = _envbuild("validate", "--lock", str(empty), "--out", str(tmp_path / "r"), cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"--lock {empty}: a folder without envbuild.lock.json" in proc.stderr
    assert not (tmp_path / "r").exists()


def test_no_lock_found_says_where_it_looked_and_how_to_pass_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(interp, "DEFAULT_LOCK", tmp_path / "etc" / "envbuild.lock.json")
    with pytest.raises(UsageError) as caught:
        interp.find_lock(None, cwd=tmp_path)
    assert caught.value.message == (
        f"no lock found: looked for {tmp_path / 'etc' / 'envbuild.lock.json'}, "
        f"{tmp_path / 'envbuild.lock.json'} (inside the image built from a bundle the lock is at "
        f"{tmp_path / 'etc' / 'envbuild.lock.json'}); pass the bundle folder with `--lock BUNDLE`, "
        "or a lock file with `--lock path/to/envbuild.lock.json`"
    )
    (tmp_path / "envbuild.lock.json").write_text("{}", encoding="utf-8")
    assert interp.find_lock(None, cwd=tmp_path).path == tmp_path / "envbuild.lock.json"


@pytest.mark.skipif(interp.DEFAULT_LOCK.exists(), reason="inside an image: the default lock exists")
def test_no_lock_found_is_exit_2_without_a_traceback(tmp_path: Path) -> None:
    proc = _envbuild("validate", "--out", str(tmp_path / "runs"), cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"no lock found: looked for /etc/envbuild/envbuild.lock.json, {tmp_path}/envbuild.lock.json" in (
        proc.stderr
    )
    assert "`--lock BUNDLE`" in proc.stderr and not (tmp_path / "runs").exists()


# -- the interpreter under test, as the checks see it -------------------------------------------------


def test_checks_argv_and_path() -> None:
    py = "/srv/venv/bin/python"
    assert interp.check_argv(["python", "-c", "x"], py) == (py, "-c", "x")
    assert interp.check_argv(["python3", "a.py"], py) == (py, "a.py")
    assert interp.check_argv(["python3.11", "a.py"], py) == (py, "a.py")
    assert interp.check_argv(["./python", "a.py"], py) == ("./python", "a.py")  # a path is left alone
    assert interp.check_argv(["pytest", "-q"], py) == ("pytest", "-q")  # found on PATH, venv's bin first
    env = interp.check_env(py, {"PATH": "/usr/bin:/srv/venv/bin:/bin", "HOME": "/h"})
    assert env == {"PATH": "/srv/venv/bin:/usr/bin:/bin", "HOME": "/h"}


def test_choosing_the_interpreter(tmp_path: Path) -> None:
    lock = cpu_lock(tmp_path, python_executable=str(tmp_path / "nope" / "bin" / "python"))
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(VENV_PYTHON)
    assert interp.choose_python(None, lock, {"VIRTUAL_ENV": str(venv.parent)}) == (
        str(venv / "python"),
        "the active environment ($VIRTUAL_ENV)",
    )
    assert interp.choose_python(None, lock, {}) == (sys.executable, "envbuild's own interpreter")
    here = cpu_lock(tmp_path)  # python_executable exists: inside "the image"
    assert interp.choose_python(None, here, {"VIRTUAL_ENV": str(venv.parent)})[1] == (
        "the lock's python_executable"
    )
    with pytest.raises(UsageError, match="no executable interpreter"):
        interp.choose_python(str(tmp_path / "missing"), lock)


# -- --keep-going: stages follow facts, not order ----------------------------------------------------


def _app(tmp_path: Path) -> Path:
    workdir = tmp_path / "app"
    shutil.copytree(PILOT_APP, workdir)
    return workdir


def test_a_python_version_mismatch_hides_neither_packages_nor_checks(tmp_path: Path) -> None:
    workdir = _app(tmp_path)
    lock = cpu_lock(workdir, python_version="3.12")
    kept, _ = run_validation(
        lock, out=tmp_path / "runs", stages=["interpreter", "packages", "checks"], keep_going=True
    )
    status = {s.stage: s.status for s in kept.stages}
    assert status == {"interpreter": "failed", "packages": "passed", "checks": "passed"}
    assert (
        kept.stage("interpreter").error
        == f"Python {platform.python_version()} is running; the lock declares Python 3.12"
    )
    assert kept.first_failure is not None and kept.first_failure.stage == "interpreter"
    assert kept.stage_reached == "checks" and exit_code(kept) == 1

    stopped, _ = run_validation(lock, out=tmp_path / "runs", stages=["interpreter", "packages", "checks"])
    assert stopped.stage("packages").error == "prerequisite 'interpreter' failed"
    assert stopped.stage("checks").error == "prerequisite 'packages' aborted"
    assert stopped.stage_reached == "interpreter"


def test_a_package_problem_stops_neither_accelerator_nor_checks(tmp_path: Path) -> None:
    workdir = _app(tmp_path)
    base = cpu_lock(workdir)
    drift = LockPackage(name="sympy", version="0.0.1", requirement="sympy==0.0.1", origin="test")
    lock = replace(base, packages=(*base.packages, drift))
    report, _ = run_validation(
        lock, out=tmp_path / "runs", stages=["packages", "accelerator", "checks"], keep_going=True
    )
    status = {s.stage: s.status for s in report.stages}
    assert status == {
        "interpreter": "passed",
        "packages": "failed",
        "accelerator": "passed",
        "checks": "passed",
    }
    assert report.stage("packages").facts["differences"] == [
        f"sympy: declared 0.0.1, installed {metadata.version('sympy')}"
    ]


def _bare_venv(tmp_path: Path, *, with_this_venv: bool) -> Path:
    """A venv with nothing in it; ``with_this_venv`` adds this venv's site-packages through a .pth file
    (torch importable), so broken distributions can be added without touching this venv."""
    root = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = next((root / "lib").glob("python3.*/site-packages"))
    if with_this_venv:
        (site / "this_venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    return root


def _fake_dist(root: Path, name: str, version: str, requires: list[str]) -> None:
    site = next((root / "lib").glob("python3.*/site-packages"))
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    (info / "METADATA").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_torch_missing_aborts_only_the_torch_stages_and_the_failed_check_shows_its_output(
    tmp_path: Path,
) -> None:
    """An interpreter without torch: packages and accelerator say so, the torch stages cannot run (a
    fact is missing), the pilot check still runs, fails, and report.md shows its output tail."""
    bare = _bare_venv(tmp_path, with_this_venv=False)
    lock = cpu_lock(_app(tmp_path))
    report, run_dir = run_validation(
        lock, python=str(bare / "bin" / "python"), out=tmp_path / "runs", keep_going=True
    )
    status = {s.stage: s.status for s in report.stages}
    assert status["interpreter"] == "passed" and status["os"] in ("passed", "failed")
    assert status["packages"] == "failed" and status["accelerator"] == "failed"
    assert status["memory"] == "skipped"  # a CPU lock's memory check is the host's: no torch needed
    for stage in ("devices", "compute", "extensions", "checkpoint"):
        assert status[stage] == "aborted"
        assert report.stage(stage).error == (
            "not run: torch does not import in the interpreter under test (stage 'accelerator' failed: "
            "import torch failed: ModuleNotFoundError: No module named 'torch')"
        )
    checks = report.stage("checks")
    assert checks.status == "failed" and checks.hint is not None and "report.md" in checks.hint
    md = (run_dir / "report.md").read_text(encoding="utf-8")
    section = md[md.index("## Checks") :]
    assert "### `pilot`: failed" in section
    assert f"- command: `{bare / 'bin' / 'python'} src/pilot.py --config config/pilot.json`" in section
    assert "ModuleNotFoundError: No module named 'torch'" in section


def test_an_interpreter_that_does_not_start_stops_everything_even_with_keep_going(tmp_path: Path) -> None:
    broken = tmp_path / "python"
    broken.write_text(
        "#!/bin/sh\necho 'error while loading shared libraries: libpython3.11.so' >&2\nexit 127\n"
    )
    broken.chmod(0o755)
    report, _ = run_validation(
        cpu_lock(tmp_path), python=str(broken), out=tmp_path / "runs", keep_going=True, workdir=tmp_path
    )
    assert report.stage("interpreter").status == "failed"
    # the container stage needs no interpreter under test (the validator reads its facts itself)
    assert report.stage("container").status == "passed"
    after = [s for s in report.stages if s.stage not in ("interpreter", "container")]
    assert {s.status for s in after} == {"aborted"}
    assert report.stage("checks").error == (
        "not run: the interpreter under test did not run a probe (stage 'interpreter' failed: probe "
        "'interpreter' exited with status 127: error while loading shared libraries: libpython3.11.so)"
    )


def test_a_broken_distribution_outside_the_lock_is_a_warning(tmp_path: Path) -> None:
    """Real probes: a venv with torch (this venv's, through a .pth) plus PyGObject without pycairo (the
    lock neither names nor needs it) passes with a warning; a broken locked distribution fails."""
    bare = _bare_venv(tmp_path, with_this_venv=True)
    _fake_dist(bare, "PyGObject", "3.42.2", ["pycairo>=1.16"])
    python = str(bare / "bin" / "python")
    lock = cpu_lock(tmp_path)
    report, run_dir = run_validation(lock, python=python, out=tmp_path / "a", stages=["packages"])
    pk = report.stage("packages")
    broken = "PyGObject 3.42.2 requires pycairo, which is not installed"
    assert pk.status == "passed", pk.error
    assert pk.facts["broken"] == [] and pk.facts["broken_unlocked"] == [broken]
    assert pk.hint is not None and pk.hint.endswith(
        f"1 broken requirement of distributions the lock neither names nor needs (not failing): {broken}"
    )
    md = (run_dir / "report.md").read_text(encoding="utf-8")
    assert (
        f"**Broken requirements the lock neither names nor needs (not failing)** (1):\n\n- {broken}\n" in md
    )

    _fake_dist(bare, "locked-thing", "1.0", ["missing-dep"])
    named = LockPackage(name="locked-thing", version="1.0", requirement="locked-thing==1.0", origin="test")
    lock = replace(lock, packages=(*lock.packages, named))
    report, _ = run_validation(lock, python=python, out=tmp_path / "b", stages=["packages"])
    pk = report.stage("packages")
    assert pk.status == "failed"
    assert pk.error == "1 package problem: locked-thing 1.0 requires missing-dep, which is not installed"
    assert pk.facts["broken_unlocked"] == [broken]


def test_checks_run_with_the_interpreter_under_test_first_on_path(tmp_path: Path) -> None:
    """argv[0] ``python`` is the interpreter under test, and a ``python3`` the check starts itself is
    found in the interpreter's bin folder; the validator's own PATH is back afterwards."""
    bare = _bare_venv(tmp_path, with_this_venv=False)
    code = "import shutil, sys; print(sys.executable); print(shutil.which('python3'))"
    check = CheckSpec(name="where", run=("python", "-c", code))
    lock = cpu_lock(tmp_path, checks=(check,), packages=())
    before = os.environ.get("PATH")
    report, _ = run_validation(
        lock, python=str(bare / "bin" / "python"), out=tmp_path / "runs", stages=["checks"], workdir=tmp_path
    )
    assert os.environ.get("PATH") == before
    (entry,) = report.stage("checks").facts["checks"]
    assert entry["status"] == "passed", entry
    assert entry["output_tail"].split() == [str(bare / "bin" / "python"), str(bare / "bin" / "python3")]
