"""The package's shape (issues 23 and 38): no import circle, no edge back up the layers, and a module past
400 lines only with its reason.

The import graph is read with the standard library: ``ast`` over ``envbuild/**/*.py``, every import a
module can run: its top-level statements and those inside functions, methods and classes too (a lazy
import is still a dependency), but not those under ``if TYPE_CHECKING:`` (annotations only).  ``from
a.b import c`` is an edge to ``a.b.c`` when that is a module of ours, else to ``a.b``; importing a
module's parent packages is not counted (``envbuild.catalog.loader`` importing
``envbuild.catalog.cache`` is not a circle through ``envbuild/catalog/__init__.py``).

**Layers** (docs/architecture.md, "Rooms and layers"): each module belongs to a room, its package under
``envbuild/`` (``envbuild.plan.versions``: ``plan``) or, for a top-level module (``envbuild.atomic``,
``envbuild.models``, ``envbuild.errors``, ...), the ``base``.  :data:`LAYERS` orders the rooms bottom
up; a module may import its own room and the rooms below it.  An edge up the layers fails unless it is
on :data:`UPWARD_ALLOWED`, each entry with the reason it is there; an entry that no longer matches an
edge fails too, so the list only shrinks.

**Private names** stay in their module: no module imports a ``_``-prefixed name from another envbuild module
(:data:`PRIVATE_ALLOWED` lists any that must, each with why).  A name another module needs is public, or
the two modules are one concern and one module.

**Size**: 400 lines is a signal, not a wall.  A concern may sit in one module past it, rather than leak
private names across files, when the module's docstring says why in a line starting ``Over 400 lines
because:``.

(``tests/structure/`` holds the container-structure-test config for the built image, not these.)
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "envbuild"
MAX_LINES = 400

OVER_LIMIT_REASON = "Over 400 lines because:"

# The rooms, bottom up.  "base": envbuild's top-level modules and packages every stage shares (models,
# errors, boundary, compat, atomic, secrets, untrusted, resources, payloads, ...).  A profile is loaded
# without the catalog; the catalog's rows, then the hardware rules over them, feed the plan; render writes
# the plan's bundle, lock resolves it, image fetches and builds it; report holds the report folder (its
# model, writing, verifying, signing, comparing); validate runs on the machine and writes its report; cli on
# top.
LAYERS: tuple[str, ...] = (
    "base",
    "profile",
    "catalog",
    "hardware",
    "plan",
    "render",
    "lock",
    "image",
    "report",
    "validate",
    "cli",
)

# Edges up the layers still in place, (importer, imported) module names, each with why.  Empty since issue 38:
# a new entry needs its one-line reason, and a stale entry fails (the list only shrinks).
UPWARD_ALLOWED: dict[tuple[str, str], str] = {}


# (importer, imported module, name) of a private name imported across modules, each with why.  Empty.
PRIVATE_ALLOWED: dict[tuple[str, str, str], str] = {}


def room(module: str) -> str:
    """``envbuild.plan.versions`` -> ``plan``; a top-level module (or ``envbuild`` itself) -> ``base``."""
    parts = module.split(".")
    if module == "envbuild.__main__":
        return "cli"
    if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir() and parts[1] in LAYERS):
        return parts[1] if parts[1] in LAYERS else "base"
    return "base"


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


class _Imports(ast.NodeVisitor):
    """Every import statement of a module, at any depth, but those under ``if TYPE_CHECKING:``."""

    def __init__(self) -> None:
        self.found: list[ast.Import | ast.ImportFrom] = []

    def visit_Import(self, node: ast.Import) -> None:
        self.found.append(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self.found.append(node)

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            for stmt in node.orelse:
                self.visit(stmt)
        else:
            self.generic_visit(node)


def all_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    visitor = _Imports()
    visitor.visit(tree)
    return visitor.found


@functools.cache
def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in all_imports(tree):
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


def test_function_level_imports_are_counted() -> None:
    graph = import_graph()
    # lazy imports (inside functions): cli/_report.py imports the report room's modules only when a
    # command runs, and report/html.py the Jinja environment only when it renders
    assert "envbuild.report.sign" in graph["envbuild.cli._report"]
    assert "envbuild.templating" in graph["envbuild.report.html"]
    tree = ast.parse(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a\nelse:\n    import b\n"
        "def f():\n    import c\n    if TYPE_CHECKING:\n        import d\n"
    )
    names = [alias.name for node in all_imports(tree) for alias in node.names]
    assert names == ["TYPE_CHECKING", "b", "c"]


def test_no_import_circle() -> None:
    found = circles(import_graph())
    assert not found, "import circles: " + "; ".join(" <-> ".join(c) for c in sorted(found))


def test_every_module_has_a_room() -> None:
    assert room("envbuild.plan.versions") == "plan" and room("envbuild.atomic") == "base"
    assert room("envbuild.models.lock") == "base" and room("envbuild.secrets.values") == "base"
    assert room("envbuild") == "base" and room("envbuild.report") == "report"
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    unplaced = packages - set(LAYERS) - {"models", "secrets", "payloads"}  # the base's packages
    assert not unplaced, f"packages with no place in LAYERS: {sorted(unplaced)}"


def upward_edges(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    rank = {name: i for i, name in enumerate(LAYERS)}
    return {
        (src, dst) for src, targets in graph.items() for dst in targets if rank[room(dst)] > rank[room(src)]
    }


def test_no_edge_up_the_layers() -> None:
    new = sorted(upward_edges(import_graph()) - set(UPWARD_ALLOWED))
    assert not new, (
        "imports up the layers ("
        + " < ".join(LAYERS)
        + "): "
        + "; ".join(f"{src} ({room(src)}) -> {dst} ({room(dst)})" for src, dst in new)
    )


def test_the_upward_allow_list_is_current() -> None:
    """An allowed edge that is gone leaves the list, so the list only shrinks."""
    stale = sorted(set(UPWARD_ALLOWED) - upward_edges(import_graph()))
    assert not stale, f"no longer an upward edge, remove from UPWARD_ALLOWED: {stale}"


def private_names(
    name: str, is_package: bool, tree: ast.Module, modules: set[str]
) -> set[tuple[str, str, str]]:
    """(importer, imported module, name) for every ``from envbuild.x import _name`` in module ``name`` (any
    depth, ``if TYPE_CHECKING:`` too) where ``_name`` is not a dunder and not a module (``from envbuild.cli
    import _report`` imports a module)."""
    found: set[tuple[str, str, str]] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        base = node.module or ""
        if node.level:
            anchor = name.split(".") if is_package else name.split(".")[:-1]
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join([*anchor, base] if base else anchor)
        if base.split(".")[0] != "envbuild" or base == name:
            continue
        for alias in node.names:
            private = alias.name.startswith("_") and not alias.name.startswith("__")
            if private and f"{base}.{alias.name}" not in modules:
                found.add((name, base, alias.name))
    return found


def private_imports() -> set[tuple[str, str, str]]:
    modules = _modules()
    return {
        found
        for name, path in modules.items()
        for found in private_names(
            name, path.name == "__init__.py", ast.parse(path.read_text(encoding="utf-8")), set(modules)
        )
    }


def test_private_imports_are_found() -> None:
    tree = ast.parse(
        "from envbuild.a.b import _x, y, __version__\nfrom . import _mod\nfrom .b import _z\n"
        "def f():\n    from envbuild.c import _w\nimport os\nfrom os import _exit\n"
    )
    found = private_names("envbuild.a.m", False, tree, {"envbuild.a.m", "envbuild.a.b", "envbuild.a._mod"})
    assert found == {
        ("envbuild.a.m", "envbuild.a.b", "_x"),
        ("envbuild.a.m", "envbuild.a.b", "_z"),
        ("envbuild.a.m", "envbuild.c", "_w"),
    }


def test_no_module_imports_another_modules_private_name() -> None:
    new = sorted(private_imports() - set(PRIVATE_ALLOWED))
    assert not new, "private names imported across modules (make the name public, or merge the modules): " + (
        "; ".join(f"{src} imports {dst}.{n}" for src, dst, n in new)
    )
    stale = sorted(set(PRIVATE_ALLOWED) - private_imports())
    assert not stale, f"no longer imported, remove from PRIVATE_ALLOWED: {stale}"


def _line_counts() -> dict[str, int]:
    return {
        path.relative_to(ROOT).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def _says_why(path: Path) -> bool:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return any(line.strip().startswith(OVER_LIMIT_REASON) for line in doc.splitlines())


def test_a_module_over_400_lines_says_why() -> None:
    over = {
        name: lines
        for name, lines in _line_counts().items()
        if lines > MAX_LINES and not _says_why(ROOT / name)
    }
    assert not over, (
        f"modules over {MAX_LINES} lines without a line '{OVER_LIMIT_REASON} ...' in their docstring: {over}"
    )


def test_a_stated_reason_is_current() -> None:
    """A module back under the limit drops its reason, so the reasons only name real exceptions."""
    counts = _line_counts()
    stale = sorted(name for name, lines in counts.items() if lines <= MAX_LINES and _says_why(ROOT / name))
    assert not stale, f"no longer over {MAX_LINES} lines, drop '{OVER_LIMIT_REASON}' from: {stale}"
