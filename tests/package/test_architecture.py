"""The package's shape, kept by tests so that it cannot erode: its packages are its layers, each
importing only from itself and the packages below it (:data:`LAYERS`, which docs/architecture.md
describes in the same order), with no import circle between modules, top-level or inside a
function; at most eight modules outside the layers; no function over cyclomatic complexity 20
(radon's count); no module over 600 lines but the few listed with their reason; the ``cli``
package only parses and dispatches; the tests in folders that mirror the packages; and no test
module imported by another module of the tests."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

from radon.complexity import cc_visit

PACKAGE = Path(__file__).resolve().parents[2] / "dml_ep"
TESTS = PACKAGE.parent / "tests"
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"

# The layers, bottom to top: each package may import from itself and the ones before it.
LAYERS = ("core", "ort", "numerics", "passes", "realep", "operators", "planning", "reports", "runtime", "interop",
          "conformance", "sweep", "cli")
# The package's face, outside the layers: the API (``dml_ep``), ``python -m dml_ep`` and the version, which every
# layer may read (it imports nothing).
FACE = {"dml_ep": "the API", "dml_ep.__main__": "python -m dml_ep", "dml_ep.version": "the version",
        "dml_ep.backend": "the ONNX backend under the name onnx's backend tests import"}
LEAVES = {"dml_ep.version"}
MAX_COMPLEXITY = 20
MAX_LINES = 600
LONG_MODULES: dict[str, str] = {}  # module -> why it may pass MAX_LINES
CLI_LINES = 400
# Test folders that hold what no one package owns: whole models through every layer, and the package as a whole.
CROSS_CUTTING = {"end_to_end", "package"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache  # read once for every test here
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


def imported_test_modules(path: Path) -> set[str]:
    """The test modules (``test_*``) a module of tests/ imports anywhere in its body: ``import
    a.test_b``, ``from a.test_b import c`` and ``from a import test_b``."""
    def is_test(name: str) -> bool:
        return any(part.startswith("test_") for part in name.split("."))

    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if is_test(alias.name))
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            if is_test(base):
                found.add(base)
            else:
                found.update(f"{base}.{alias.name}" if node.module else base + alias.name for alias in node.names if is_test(alias.name))
    return found


@functools.cache
def import_graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports(name, path, set(found)) for name, path in found.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

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


def layer(module: str) -> str | None:
    """The layer package a module belongs to, or None for the package's face."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def test_no_import_circle_between_modules():
    assert circles(import_graph()) == []


def test_no_import_circle_between_packages():
    packages: dict[str, set[str]] = {}
    for name, imported in import_graph().items():
        if layer(name) is not None:
            packages.setdefault(layer(name), set()).update(layer(m) for m in imported if layer(m) not in (None, layer(name)))
    assert circles({p: packages.get(p, set()) for p in LAYERS}) == []


def test_every_module_is_in_a_layer_package_but_the_face():
    outside = {name for name in modules() if layer(name) is None}
    assert outside == set(FACE)
    assert len(outside) <= 8
    assert {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()} == set(LAYERS)


def test_each_package_imports_only_itself_and_the_layers_below():
    upward = []
    for name, imported in sorted(import_graph().items()):
        own = layer(name)
        for target in sorted(imported):
            if target in LEAVES:
                continue
            if own is None:  # the face reads any layer, and no layer reads the face
                assert name in FACE, name
                continue
            if layer(target) is None or LAYERS.index(layer(target)) > LAYERS.index(own):
                upward.append(f"{name} -> {target}")
    assert upward == []


def test_the_leaves_import_nothing():
    graph = import_graph()
    assert {leaf: graph[leaf] for leaf in LEAVES} == {leaf: set() for leaf in LEAVES}


def test_the_architecture_doc_describes_the_layers_in_order():
    text = ARCHITECTURE.read_text()
    rows = re.findall(r"^\| \d+ \| `(\w+)/` \|", text, flags=re.M)
    assert tuple(rows) == LAYERS


def test_no_function_over_the_complexity_limit():
    over = []
    for name, path in sorted(modules().items()):
        for block in cc_visit(path.read_text()):
            for item in [block, *getattr(block, "methods", [])]:
                if item.complexity > MAX_COMPLEXITY:
                    over.append(f"{name}.{item.fullname}: {item.complexity}")
    assert over == []


def test_no_module_over_the_line_limit_but_the_listed():
    lines = {name: len(path.read_text().splitlines()) for name, path in modules().items()}
    assert {name: n for name, n in lines.items() if n > MAX_LINES and name not in LONG_MODULES} == {}
    assert all(lines[name] > MAX_LINES for name in LONG_MODULES), "a listed module is short now: unlist it"


def test_the_cli_parses_and_dispatches_only():
    """Each module of ``dml_ep.cli`` stays short, defines no class but argparse's, and its commands
    hand the work to the layers below."""
    for path in (PACKAGE / "cli").glob("*.py"):
        assert len(path.read_text().splitlines()) <= CLI_LINES, path.name
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                assert any("argparse" in ast.unparse(base) for base in node.bases), f"{path.name}: class {node.name}"


def test_tests_mirror_the_packages():
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders - CROSS_CUTTING <= set(LAYERS)
    assert not [p.name for p in TESTS.glob("test_*.py")], "a test module belongs in its package's folder"
    for folder in folders - CROSS_CUTTING:
        assert (PACKAGE / folder).is_dir()


def test_no_test_module_imports_another():
    """What several tests share lives in a helper module of tests/ (``onnx_builders``,
    ``exact_values``, ``operator_cases``, ``cli_runs``, ``dxdispatch_replays``), never in a test
    module: no module of tests/ imports one, at the top or inside a function."""
    importing = {str(path.relative_to(TESTS)): sorted(found) for path in sorted(TESTS.rglob("*.py")) if (found := imported_test_modules(path))}
    assert importing == {}
