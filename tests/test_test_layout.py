"""The tests share their infrastructure through support modules, never through each other (issue 38).

A test module (``tests/test_*.py``) imports no other test module: a helper two modules need lives in a
support module (``tests/*_support.py``, ``conftest.py`` for fixtures, or another non-test module here).
Each module of tests/ is imported one way only, by its bare name (``from lock_support import ...``):
pytest puts tests/ on ``sys.path`` (rootdir-relative "prepend" import, no ``__init__.py``), and the same
file imported as ``tests.lock_support`` too would be a second module object with state of its own.
Imports inside functions count.
"""

from __future__ import annotations

import ast
from itertools import pairwise
from pathlib import Path

TESTS = Path(__file__).resolve().parent
LOCAL = {p.stem for p in TESTS.glob("*.py")}


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, dotted name) of every module ``path`` imports, at any depth (functions included)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            if node.module == "tests":  # from tests import lock_support
                found += [(node.lineno, f"tests.{alias.name}") for alias in node.names]
    return found


def _local_imports() -> list[tuple[str, int, str]]:
    """(file, line, name) of each import of a module of tests/, by either name."""
    return [
        (path.name, line, name)
        for path in sorted(TESTS.glob("*.py"))
        for line, name in _imports(path)
        if name.split(".")[0] in LOCAL or (name.startswith("tests.") and name.split(".")[1] in LOCAL)
    ]


def test_the_scan_sees_the_support_imports() -> None:
    """The scan is not vacuous: the support modules are found, imported by test modules."""
    names = {name for _, _, name in _local_imports()}
    assert {"cli_support", "build_support", "index_support", "lock_support", "plan_support"} <= names
    assert "render_support" in names and "validate_support" in names


def test_no_test_module_imports_another_test_module() -> None:
    offending = [
        f"{file}:{line}: imports {name}"
        for file, line, name in _local_imports()
        if name.removeprefix("tests.").split(".")[0].startswith("test_")
    ]
    assert offending == [], "move the shared helper into a *_support.py module:\n" + "\n".join(offending)


def test_each_support_module_is_imported_under_one_name() -> None:
    offending = [
        f"{file}:{line}: imports {name} (import it as {name.removeprefix('tests.')})"
        for file, line, name in _local_imports()
        if name.startswith("tests.")
    ]
    assert offending == [], "\n".join(offending)


def _spawns_envbuild(path: Path) -> list[int]:
    """Lines of ``path`` holding an argv literal with ``"-m", "envbuild"``."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, (ast.List, ast.Tuple)):
            texts = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            if any(a == "-m" and b == "envbuild" for a, b in pairwise(texts)):
                lines.append(node.lineno)
    return lines


def test_the_cli_runs_in_a_subprocess_through_cli_support_only() -> None:
    """One runner (cli_support.envbuild: a timeout always, the environment passed explicitly, or
    cli_support.ENVBUILD for a test that drives the process itself)."""
    found = {path.name: _spawns_envbuild(path) for path in sorted(TESTS.glob("*.py"))}
    spawning = {name for name, lines in found.items() if lines}
    assert "cli_support.py" in spawning  # the scan sees the runner itself
    assert sorted(spawning - {"cli_support.py"}) == [], found
