"""No import cycle anywhere in the package (issue 27): every module under ``memento/`` (the layer folders through
their symlinks) is parsed, each ``import`` statement is an edge (imports inside functions included, those under
``if TYPE_CHECKING:`` excluded), and any strongly connected set of modules fails the test, named with the lines
that close the circle.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "memento"


def _modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package is its ``__init__``)."""
    found: dict[str, Path] = {}
    folders = [(PACKAGE, "memento")]
    while folders:
        folder, name = folders.pop()
        for entry in sorted(folder.iterdir()):  # iterdir follows the layer symlinks
            if entry.is_dir() and (entry / "__init__.py").is_file():
                folders.append((entry, f"{name}.{entry.name}"))
            elif entry.suffix == ".py":
                found[name if entry.name == "__init__.py" else f"{name}.{entry.stem}"] = entry
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module, module: str, is_package: bool, modules: dict[str, Path]) -> dict[str, int]:
    """The package's modules that ``module`` imports, each with the line of its first import."""
    edges: dict[str, int] = {}

    def known(name: str) -> str | None:  # the module itself, else its nearest package
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    def add(target: str | None, line: int) -> None:
        if target is not None and target != module:
            edges.setdefault(target, line)

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.orelse:
                    visit_one(stmt)
                continue
            visit_one(child)

    def visit_one(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(known(alias.name), node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module if is_package else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{base}" if base else package
            for alias in node.names:  # ``from pkg import mod`` imports the module, ``from mod import name`` the module
                full = f"{base}.{alias.name}"
                add(full if full in modules else known(base), node.lineno)
        else:
            visit(node)

    visit(tree)
    return edges


def import_graph() -> dict[str, dict[str, int]]:
    modules = _modules()
    return {
        name: _imports(ast.parse(path.read_text(), str(path)), name, path.name == "__init__.py", modules)
        for name, path in modules.items()
    }


def knots(graph: dict[str, dict[str, int]]) -> list[set[str]]:
    """Each strongly connected set of two or more modules (Tarjan, iterative): modules that import each other,
    directly or through others."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(group)
    return groups


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One closed path through each knot: a shortest circle through its first module (breadth first)."""
    closed = []
    for group in knots(graph):
        start = min(group)
        paths = {start: [start]}
        queue = [start]
        found = None
        while queue and found is None:
            node = queue.pop(0)
            for child in sorted(graph[node]):
                if child == start:
                    found = paths[node] + [start]
                    break
                if child in group and child not in paths:
                    paths[child] = paths[node] + [child]
                    queue.append(child)
        closed.append(found or sorted(group))
    return closed


def _describe(path: list[str], graph: dict[str, dict[str, int]]) -> str:
    steps = [f"{a} (line {graph[a][b]}) -> {b}" for a, b in zip(path, path[1:], strict=False)]
    return "\n    ".join(steps)


def test_the_graph_sees_imports_inside_functions_and_follows_the_layer_symlinks() -> None:
    graph = import_graph()
    assert "memento.memory.case_bank" in graph and "memento.web.fetcher" in graph
    assert "memento.core.errors" in graph
    # an import inside a function is an edge (cli.app imports each command's module at module level; the error
    # policy imports the LM's failure explanations): each is seen
    assert "memento.llm.lm_errors" in graph["memento.core.error_policy"]


def test_a_circle_is_found_and_named() -> None:
    graph = {"a": {"b": 3}, "b": {"c": 5}, "c": {"a": 7}, "d": {"a": 1}}
    (found,) = cycles(graph)
    assert found == ["a", "b", "c", "a"]
    assert _describe(found, graph) == "a (line 3) -> b\n    b (line 5) -> c\n    c (line 7) -> a"
    assert cycles({"a": {"b": 1}, "b": {}}) == []


def test_no_import_cycle_in_the_package() -> None:
    graph = import_graph()
    found = cycles(graph)
    members = [sorted(knot) for knot in knots(graph)]
    assert not found, "import cycles:\n  " + "\n  ".join(
        f"{_describe(path, graph)}\n    (all modules of this knot: {', '.join(knot)})"
        for path, knot in zip(found, members, strict=True)
    )


def test_the_error_hierarchy_imports_nothing_of_the_project() -> None:
    assert import_graph()["memento.core.errors"] == {}
