"""Probes run in the interpreter under test and use only its standard library and the packages under
test: never envbuild or envbuild's own dependencies."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from validate_support import cpu_lock

from envbuild.validate import run_validation
from envbuild.validate.probe import PROBES_DIR

# bpy and _cycles: Blender's own modules, inside the Blender binary or the bpy wheel under test
UNDER_TEST = {"torch", "triton", "flash_attn", "xformers", "bitsandbytes", "ninja", "bpy", "_cycles"}
OPTIONAL_HELPERS = {"packaging", "pip"}  # used when the environment under test has them, else a fallback
LOCAL = {"_probe_common", "_extension_build", "_probe_ops"}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_probes_import_only_stdlib_and_packages_under_test() -> None:
    probes = sorted(PROBES_DIR.glob("*.py"))
    assert len(probes) >= 10
    allowed = set(sys.stdlib_module_names) | UNDER_TEST | OPTIONAL_HELPERS | LOCAL | {"__future__"}
    for probe in probes:
        assert _imports(probe) <= allowed, (probe.name, _imports(probe) - allowed)
        assert "envbuild" not in _imports(probe)


def test_bare_interpreter_without_envbuild_or_its_dependencies(tmp_path: Path) -> None:
    """A venv with nothing in it (not even pip): the probes still run and report what is (not) there."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    bare = str(tmp_path / "bare" / "bin" / "python")
    lock = cpu_lock(tmp_path, python_executable=bare)
    report, _ = run_validation(lock, out=tmp_path / "runs", stages=["packages"], workdir=tmp_path)
    assert report.stage("interpreter").status == "passed"
    assert report.stage("interpreter").facts["prefix"] == str(tmp_path / "bare")
    pk = report.stage("packages")
    assert pk.status == "failed"
    assert pk.facts["installed_count"] == 0 and pk.facts["check_mode"] == "names-only"
    assert pk.facts["envbuild_in_target"] is False
    assert "torch: declared 2.13.0+cpu, not installed" in pk.facts["differences"]
