"""The package's modules import one another without circles: each layer depends only on the layers below it.

Every import counts, the ones inside functions too (a lazy import hides a circle from the interpreter, not from
a reader), except those under ``if TYPE_CHECKING:``, which never run.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import manifest_committer

PACKAGE = Path(manifest_committer.__file__).resolve().parent
NAME = "manifest_committer"


def module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE).with_suffix("")
    parts = [NAME, *relative.parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules() -> dict[str, Path]:
    """Every module, ``stages`` too (a symbolic link into the package, which ``rglob`` would not follow)."""
    paths = [
        Path(directory) / name
        for directory, _, names in os.walk(PACKAGE, followlinks=True)
        for name in names
        if name.endswith(".py")
    ]
    return {module_name(path): path for path in sorted(paths)}


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_modules(name: str, path: Path, known: set[str]) -> set[str]:
    """The package modules ``name`` imports: ``from x import y`` counts ``x.y`` where that is a module."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking_only(node):
            for statement in node.orelse:
                visit(statement)
            return
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                found.add(candidate if candidate in known else target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {module for module in found if module in known and module != name}


def import_graph() -> dict[str, set[str]]:
    modules = package_modules()
    known = set(modules)
    return {name: imported_modules(name, path, known) for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def test_the_finder_sees_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_graph_holds_the_lazy_imports() -> None:
    graph = import_graph()
    assert "manifest_committer.protocols.registry" in graph["manifest_committer"]
    assert "manifest_committer.operate.commands" in graph["manifest_committer.cli"]  # imported inside a function
    assert "manifest_committer.stages.base" in graph["manifest_committer.stages.manifest.commit_job"]


def test_no_module_imports_itself_through_others() -> None:
    found = circles(import_graph())
    assert found == [], "import circles: " + "; ".join(" -> ".join(component) for component in found)
