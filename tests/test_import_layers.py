"""dml_ep's modules import one another without a circle, and only from their own layer or the
ones below (the table of docs/architecture.md), top-level or inside a function: a circle makes
import order matter, and a lazy import would hide it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "dml_ep"
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in PACKAGE.rglob("*.py") if "build" not in path.parts}


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The dml_ep modules ``name`` imports anywhere in its body (a package's ``from . import x``
    names the submodule x where there is one, else the package)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {module for module in found if module in known and module != name}


def import_graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports(name, path, set(found)) for name, path in found.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
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

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def test_no_import_circle():
    assert circles(import_graph()) == []


def test_the_check_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def layers() -> dict[str, int]:
    """docs/architecture.md's layers: module or package (``operators/``) -> its layer's number."""
    found = {}
    for line in ARCHITECTURE.read_text().splitlines():
        row = re.match(r"\| (\d+) \| [^|]+ \| ([^|]+) \|", line)
        if row:
            for name in re.findall(r"`([^`]+)`", row.group(2)):
                name = name.rstrip("/").replace("/", ".")
                found[name if name == "dml_ep" else f"dml_ep.{name}"] = int(row.group(1))
    return found


def layer_of(module: str, table: dict[str, int]) -> int | None:
    """The layer of the longest name in ``table`` that is ``module`` or a package holding it."""
    holders = [name for name in table if module == name or module.startswith(name + ".") and name != "dml_ep"]
    return table[max(holders, key=len)] if holders else None


def test_every_module_has_a_layer():
    table = layers()
    assert len(set(table.values())) >= 8, "docs/architecture.md's table of layers"
    assert [module for module in import_graph() if layer_of(module, table) is None] == []


def test_no_module_imports_from_a_layer_above_its_own():
    table, graph = layers(), import_graph()
    upward = [(module, imported) for module, imports in graph.items() for imported in imports
              if (layer_of(imported, table) or 0) > (layer_of(module, table) or 0)]
    assert upward == []


def test_the_layer_check_finds_an_upward_import():
    table = {"dml_ep.graph": 0, "dml_ep.operators": 3, "dml_ep.operators.base": 2}
    assert layer_of("dml_ep.operators.join", table) == 3 and layer_of("dml_ep.operators.base", table) == 2
    assert layer_of("dml_ep.session", table) is None
