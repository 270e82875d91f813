"""The package's shape (issue 23 item 7): no module over 400 lines, and no import circle.

The import graph is read with the standard library: ``ast`` over ``envbuild/**/*.py``, the imports a
module runs when it is imported (its top-level statements, those under a top-level ``try``/``if`` too),
not those inside functions or under ``if TYPE_CHECKING``.  ``from a.b import c`` is an edge to
``a.b.c`` when that is a module of ours, else to ``a.b``; importing a module's parent packages is not
counted (``envbuild.catalog.loader`` importing ``envbuild.catalog.cache`` is not a circle through
``envbuild/catalog/__init__.py``).

(``tests/structure/`` holds the container-structure-test config for the built image, not these.)
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "envbuild"
MAX_LINES = 400

# Modules still over MAX_LINES: to be split.
OVER_LIMIT_TO_BE_SPLIT: set[str] = set()

# Import circles outside the modules split so far, each a sorted tuple of the modules in one strongly
# connected component; test_no_import_circle is xfail (strict) while this is not empty, so it fails
# once they are fixed, as a reminder to empty this.
KNOWN_CIRCLES: set[tuple[str, ...]] = set()


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _top_level_imports(body: list[ast.stmt]) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                found += _top_level_imports(node.body)
            found += _top_level_imports(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                found += _top_level_imports(block)
    return found


@functools.cache
def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in _top_level_imports(tree.body):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = name.split(".") if is_package else name.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                    for alias in node.names
                ]
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def circles(graph: dict[str, set[str]]) -> set[tuple[str, ...]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[tuple[str, ...]] = set()

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                found.add(tuple(sorted(component)))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_is_read() -> None:
    graph = import_graph()
    assert "envbuild.catalog.cache" in graph["envbuild.catalog.loader"]
    assert "envbuild.cli" in graph  # a package is its __init__.py


def test_circles_are_found() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == {("a", "b", "c")}
    assert circles({"a": {"b"}, "b": set()}) == set()


def test_no_new_import_circle() -> None:
    """No circle beyond the known ones (each named in KNOWN_CIRCLES, to be fixed by its owner)."""
    new = circles(import_graph()) - KNOWN_CIRCLES
    assert not new, "import circles: " + "; ".join(" <-> ".join(c) for c in sorted(new))


@pytest.mark.xfail(
    bool(KNOWN_CIRCLES),
    reason="known import circles: " + "; ".join(" <-> ".join(c) for c in sorted(KNOWN_CIRCLES)),
    strict=True,
)
def test_no_import_circle() -> None:
    found = circles(import_graph())
    assert not found, "import circles: " + "; ".join(" <-> ".join(c) for c in sorted(found))


def _line_counts() -> dict[str, int]:
    return {
        path.relative_to(ROOT).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def test_no_module_over_400_lines() -> None:
    over = {
        name: lines
        for name, lines in _line_counts().items()
        if lines > MAX_LINES and name not in OVER_LIMIT_TO_BE_SPLIT
    }
    assert not over, f"modules over {MAX_LINES} lines: {over}"


def test_the_allow_list_is_current() -> None:
    """A module split below the limit (or gone) leaves the allow-list, so the list only shrinks."""
    counts = _line_counts()
    stale = sorted(name for name in OVER_LIMIT_TO_BE_SPLIT if counts.get(name, 0) <= MAX_LINES)
    assert not stale, f"no longer over {MAX_LINES} lines, remove from OVER_LIMIT_TO_BE_SPLIT: {stale}"
