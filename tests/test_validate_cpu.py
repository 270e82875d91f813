"""The CPU path end to end, with the real torch 2.13.0 of this venv and real probe processes.

The lock is ``envbuild render``'s lock for the built-in ``pytorch-cpu`` profile, fitted to this venv
(see validate_support.cpu_lock); the profile's own pilot check runs on a copy of its app.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from cli_support import envbuild
from validate_support import cpu_lock, venv_distributions

from envbuild.boundary import to_json
from envbuild.models import LockedDistribution
from envbuild.report.verify import verify_report
from envbuild.validate import exit_code, run_validation

REPO = Path(__file__).resolve().parent.parent
SECRET = "hf_envbuildTestSecret9f8e7d"


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # `python` = this venv
    env["HF_TOKEN"] = SECRET
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One full validation per session (the C++ extension build takes ~25 s on 2 cores)."""
    root = tmp_path_factory.mktemp("cpu-e2e")
    workdir = root / "workspace"
    shutil.copytree(REPO / "profiles" / "apps" / "pilot", workdir)
    lock_file = root / "envbuild.lock.json"
    lock_file.write_text(to_json(cpu_lock(workdir), indent=2), encoding="utf-8")
    out = root / "runs"
    # the C++ op is built afresh, into this cache
    proc = envbuild(
        *("validate", "--lock", lock_file, "--out", out, "--json"),
        env=_env(XDG_CACHE_HOME=str(root / "cache")),
        timeout=900,
    )
    (run_dir,) = list(out.iterdir())
    report = json.loads(proc.stdout)["report"]
    return {"proc": proc, "run_dir": run_dir, "report": report, "workdir": workdir, "cache": root / "cache"}


@pytest.mark.slow
def test_every_applicable_stage_passes(cpu_run: dict[str, Any]) -> None:
    proc, report = cpu_run["proc"], cpu_run["report"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    statuses = {s["stage"]: s["status"] for s in report["stages"]}
    assert statuses == {
        "interpreter": "passed",
        "os": "passed",
        "container": "passed",
        "packages": "passed",
        "accelerator": "passed",
        "devices": "skipped",
        "compute": "passed",
        "extensions": "passed",
        "memory": "skipped",
        "checkpoint": "passed",
        "checks": "passed",
    }
    skipped = {s["stage"]: s["facts"]["reason"] for s in report["stages"] if s["status"] == "skipped"}
    assert skipped["devices"] == "cpu lock: no accelerator devices to check"
    assert "gpu_memory_gib" in skipped["memory"]
    assert report["ok"] is True and report["first_failure"] is None and report["stage_reached"] == "checks"
    assert report["format"] == "envbuild.report/1"


@pytest.mark.slow
def test_cpp_extension_compiled_and_ran(cpu_run: dict[str, Any]) -> None:
    ext = next(s for s in cpu_run["report"]["stages"] if s["stage"] == "extensions")
    (part,) = ext["facts"]["parts"]
    assert part["name"] == "cpp_op" and part["status"] == "passed"
    assert part["max_error"] == 0.0


@pytest.mark.slow
def test_a_second_run_loads_the_cached_extension(
    cpu_run: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first run built the op into $XDG_CACHE_HOME/envbuild/torch-extensions, in a folder named
    by a hash of its inputs, in a process of its own; a second run loads it in the warm worker (no
    compiler run, no torch import of its own) and still runs it.  The stage's own work (load and run,
    timed in the worker) takes at most 5 s; its wall time adds the wait for the worker's torch import,
    which the accelerator stage waits for too (shared, and only as fast as the machine's load allows)."""
    ext = next(s for s in cpu_run["report"]["stages"] if s["stage"] == "extensions")
    (first,) = ext["facts"]["parts"]
    built = Path(first["build_directory"])
    assert (
        ext["facts"]["process"] == "its own" and ext["facts"]["why_own"] == "no op is built in the cache yet"
    )
    assert first["cache"] == "miss" and built.parent == cpu_run["cache"] / "envbuild" / "torch-extensions"
    assert built.name.startswith("envbuild_probe_cpp_") and (built / f"{built.name}.so").is_file()
    monkeypatch.setenv("XDG_CACHE_HOME", str(cpu_run["cache"]))
    report, _ = _quick(tmp_path, {}, stages=["extensions"])
    second = report.stage("extensions")
    assert second.status == "passed" and second.facts["process"] == "warm worker", second.facts
    (part,) = second.facts["parts"]
    assert part["cache"] == "hit" and part["build_directory"] == str(built) and part["max_error"] == 0.0
    assert part["seconds"] <= 5.0, part  # load and run, in the worker


@pytest.mark.slow
def test_checkpoint_round_trip_in_a_fresh_process(cpu_run: dict[str, Any]) -> None:
    ck = next(s for s in cpu_run["report"]["stages"] if s["stage"] == "checkpoint")["facts"]
    assert ck["bitwise_equal"] is True and ck["max_abs_diff"] == 0.0
    assert ck["resumed_from_step"] == 4 and ck["steps"] == 8
    assert ck["size_bytes"] > 0
    folder = cpu_run["workdir"] / "runs" / "envbuild-checkpoint"
    # written in a fresh subfolder of checkpoint_dir, removed with the folders the stage created
    assert Path(ck["path"]).parent.parent == folder and ck["folder"] == str(folder)
    assert ck["work_folder_removed"] is True and not Path(ck["work_folder"]).exists()
    assert not folder.exists()


@pytest.mark.slow
def test_pilot_check_and_facts(cpu_run: dict[str, Any]) -> None:
    stages = {s["stage"]: s for s in cpu_run["report"]["stages"]}
    (pilot,) = stages["checks"]["facts"]["checks"]
    assert pilot["name"] == "pilot" and pilot["status"] == "passed" and pilot["returncode"] == 0
    assert stages["packages"]["facts"]["declared_installed"]["torch"] == "2.13.0+cpu"
    assert stages["interpreter"]["facts"]["prefix"] == sys.prefix
    compute = stages["compute"]["facts"]["checks"]
    assert [(c["device"], c["dtype"], c["ok"]) for c in compute] == [("cpu", "float32", True)]


@pytest.mark.slow
def test_report_files_manifest_and_redaction(cpu_run: dict[str, Any]) -> None:
    run_dir: Path = cpu_run["run_dir"]
    names = {p.name for p in run_dir.iterdir()}
    assert {
        "report.json",
        "report.md",
        "junit.xml",
        "pip-freeze.txt",
        "os-release",
        "env.txt",
        "MANIFEST.sha256",
    } <= names
    assert verify_report(run_dir) == []
    assert "torch==2.13.0+cpu" in (run_dir / "pip-freeze.txt").read_text().splitlines()
    assert "HF_TOKEN=[REDACTED]" in (run_dir / "env.txt").read_text().splitlines()
    for path in run_dir.iterdir():
        assert SECRET not in path.read_text(encoding="utf-8"), path.name
    assert SECRET not in cpu_run["proc"].stdout + cpu_run["proc"].stderr


def _quick(tmp_path: Path, lock_update: dict[str, Any], **kwargs: Any):  # type: ignore[no-untyped-def]
    lock = cpu_lock(tmp_path, **lock_update)
    lock_file = tmp_path / "lock.json"
    lock_file.write_text(to_json(lock), encoding="utf-8")
    return run_validation(lock_file, out=tmp_path / "runs", workdir=tmp_path, **kwargs)


def test_drift_names_exactly_the_difference(tmp_path: Path) -> None:
    base = cpu_lock(tmp_path)
    packages = tuple(
        replace(p, version="2.12.0", requirement="torch==2.12.0+cpu") if p.name == "torch" else p
        for p in base.packages
    )
    report, run_dir = _quick(tmp_path, {"packages": packages})
    pk = report.stage("packages")
    assert pk.status == "failed"
    assert pk.facts["differences"] == ["torch: declared 2.12.0+cpu, installed 2.13.0+cpu"]
    assert pk.error == "1 package problem: torch: declared 2.12.0+cpu, installed 2.13.0+cpu"
    after = [s for s in report.stages if s.stage not in ("interpreter", "os", "container", "packages")]
    assert {s.status for s in after} == {"aborted"}
    assert report.stage("accelerator").error == "prerequisite 'packages' failed"
    assert report.stage("checks").error == "prerequisite 'packages' failed"
    assert report.stage("devices").error == "prerequisite 'accelerator' aborted"
    assert report.first_failure is not None and report.first_failure.stage == "packages"
    assert exit_code(report) == 1
    assert verify_report(run_dir) == []


def test_wrong_local_variant(tmp_path: Path) -> None:
    base = cpu_lock(tmp_path)
    packages = tuple(replace(p, local="cu128") if p.name == "torch" else p for p in base.packages)
    report, _ = _quick(tmp_path, {"packages": packages}, stages=["packages"])
    assert report.stage("packages").facts["differences"] == [
        "torch: declared 2.13.0+cu128, installed 2.13.0+cpu (wrong variant: cu128 declared, cpu installed)"
    ]


def test_keep_going_runs_independent_stages(tmp_path: Path) -> None:
    report, _ = _quick(
        tmp_path, {"os_release_id": "ubuntu", "os_release_version": "24.04"}, stages=["os", "packages"]
    )
    assert report.stage("os").status == "failed"
    assert report.stage("os").error == "OS is debian 12; the lock declares ubuntu 24.04"
    assert report.stage("packages").status == "aborted"
    assert "not run: stage 'os' failed" in (report.stage("packages").error or "")
    kept, _ = _quick(
        tmp_path,
        {"os_release_id": "ubuntu", "os_release_version": "24.04"},
        stages=["os", "packages"],
        keep_going=True,
    )
    assert kept.stage("packages").status == "passed"
    assert kept.ok is False and exit_code(kept) == 1


def test_resolved_lock_compares_the_whole_installed_set(tmp_path: Path) -> None:
    """A lock holding exactly this venv's distributions passes; drift in torch's own dependency
    (sympy), a removed one and a wrong torch variant fail, each in its list; one the lock leaves out
    is an extra that does not fail."""
    dists = venv_distributions()
    report, _ = _quick(tmp_path, {"resolved": True, "distributions": dists}, stages=["packages"])
    pk = report.stage("packages")
    assert pk.status == "passed", pk.error
    assert pk.facts["lock_resolved"] is True and pk.facts["locked_count"] == len(dists)
    assert [pk.facts[k] for k in ("missing", "different", "wrong_variant", "extras")] == [[], [], [], []]

    def change(dist: LockedDistribution) -> LockedDistribution:
        if dist.name == "sympy":  # torch requires sympy>=1.13.3: a lock pin, not a range
            return replace(dist, version="1.0.0", required_by=("torch",))
        if dist.name == "torch":
            return replace(dist, local="cu128")
        if dist.name == "filelock":  # locked under a name nothing installed has
            return replace(dist, name="not-installed-here")
        return dist

    drifted = tuple(change(d) for d in dists if d.name != "mpmath")  # mpmath: installed, not locked
    report, _ = _quick(tmp_path, {"resolved": True, "distributions": drifted}, stages=["packages"])
    pk = report.stage("packages")
    have = {d.name: d.version for d in dists}
    assert pk.status == "failed"
    assert pk.facts["different"] == [f"sympy {have['sympy']} instead of 1.0.0 (required by torch)"]
    assert pk.facts["wrong_variant"] == [f"torch {have['torch']}+cpu instead of {have['torch']}+cu128"]
    assert pk.facts["missing"] == [f"not-installed-here=={have['filelock']}"]
    assert pk.facts["extras"] == [f"filelock {have['filelock']}", f"mpmath {have['mpmath']}"]
    assert "envbuild lock" not in (pk.hint or "") and "--require-hashes --no-deps" in (pk.hint or "")


def test_the_packages_probe_reads_the_torch_builds_own_version(tmp_path: Path) -> None:
    """This venv's torch (2.13.0+cpu from the PyTorch CPU index) names its tag in its metadata and in
    torch/version.py alike.  A distribution shaped like the package index's default torch build (metadata
    2.11.0, version.py 2.11.0+cu130, as recorded on a lent H200: tests/fixtures/torch/README.md) is
    written by hand into a folder put first on the probe's path, where it shadows this venv's torch."""
    import torch

    from envbuild.validate.probe import run_probe

    ours = run_probe(sys.executable, "packages", {}, 120)
    assert ours.outcome == "ok", ours.reason
    assert ours.data["builds"]["torch"] == torch.__version__ == ours.data["installed"]["torch"]
    dist_info = tmp_path / "torch-2.11.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0\n")
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "version.py").write_text(
        "from typing import Optional\n\n__all__ = ['__version__']\n"
        "__version__ = '2.11.0+cu130'\ncuda: Optional[str] = '13.0'\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    shadowing = run_probe(sys.executable, "packages", {}, 120, env=env)
    assert shadowing.outcome == "ok", shadowing.reason
    assert shadowing.data["installed"]["torch"] == "2.11.0"
    assert shadowing.data["builds"]["torch"] == "2.11.0+cu130"


def test_a_build_version_with_anything_but_version_characters_is_not_read(tmp_path: Path) -> None:
    """torch/version.py is the machine's file: a __version__ holding an escape sequence or a line break
    (written by hand here) is not taken as the build's version."""
    from envbuild.validate.probe import run_probe

    dist_info = tmp_path / "torch-2.11.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0\n")
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "version.py").write_text("__version__ = '2.11.0+cu130\x1b[31m'\n")
    probe = run_probe(sys.executable, "packages", {}, 120, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert probe.outcome == "ok", probe.reason
    assert probe.data["installed"]["torch"] == "2.11.0"
    assert "torch" not in probe.data["builds"]
