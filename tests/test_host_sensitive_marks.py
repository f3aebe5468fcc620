"""Every test that compares integer products or rounding with the host's onnxruntime carries the
``host_sensitive`` mark, which CI also runs under QEMU on other CPUs (scripts/qemu_tests.sh):
onnxruntime's uint8 x int8 GEMMs saturate on AVX2 without VNNI, and dml_ep's compiled kernels
have a build per x86-64 level. A test is taken to compare with onnxruntime when its body runs an
onnxruntime reference (``run_ort``, ``cpu_session``, a ``"ort"`` reference) or reads the host's
saturation (``host_saturates_u8s8``)."""

import ast
import re
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
# Tests that run onnxruntime but compare none of its values, and why: under emulation they cost minutes.
COMPARE_NO_VALUES = {
    "test_internal_models.py::test_u8s8_probe": "checks which models reach onnxruntime",
    "test_internal_models.py::test_every_model_handed_to_onnxruntime": "checks that every model dml_ep makes loads",
}
COMPARES_WITH_ONNXRUNTIME = re.compile(
    r"\brun_ort\(|\bcpu_session\(|host_saturates_u8s8|reference=\"ort\"|\"--reference\", \"ort\"|, \"ort\"\)")


def is_mark(expression: ast.expr) -> bool:
    """``pytest.mark.host_sensitive``, called or not."""
    if isinstance(expression, ast.Call):
        expression = expression.func
    return isinstance(expression, ast.Attribute) and expression.attr == "host_sensitive"


def module_marked(tree: ast.Module) -> bool:
    """Whether the module's ``pytestmark`` holds the mark."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            values = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
            return any(is_mark(value) for value in values)
    return False


def unmarked_tests() -> list[str]:
    unmarked = []
    for path in sorted(TESTS.glob("test_*.py")):
        if path.name == Path(__file__).name:  # its own example holds the words it looks for
            continue
        source = path.read_text()
        tree = ast.parse(source)
        if module_marked(tree):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_") and not any(map(is_mark, node.decorator_list)):
                name = f"{path.name}::{node.name}"
                if name not in COMPARE_NO_VALUES and COMPARES_WITH_ONNXRUNTIME.search(ast.get_source_segment(source, node) or ""):
                    unmarked.append(name)
    return unmarked


def test_every_test_comparing_with_onnxruntime_is_host_sensitive():
    assert unmarked_tests() == []


def test_the_check_sees_an_unmarked_test(tmp_path, monkeypatch):
    """The check itself can fail: an unmarked test that runs onnxruntime is reported, a marked one is not."""
    (tmp_path / "test_example.py").write_text(
        "import pytest\n\n"
        "def test_unmarked():\n    run_ort(model, feeds, 'ort')\n\n"
        "@pytest.mark.host_sensitive\ndef test_marked():\n    run_ort(model, feeds, 'ort')\n\n"
        "def test_unrelated():\n    assert True\n")
    monkeypatch.setattr(sys.modules[__name__], "TESTS", tmp_path)
    assert unmarked_tests() == ["test_example.py::test_unmarked"]
