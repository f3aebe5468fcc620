"""Every test that compares with the host's onnxruntime carries the ``host_sensitive`` mark, which
CI also runs under QEMU on other CPUs (scripts/qemu_tests.sh): onnxruntime's uint8 x int8 GEMMs
saturate on AVX2 without VNNI, and its kernels and dml_ep's compiled ones differ per x86-64 level.

What a test does decides, not its text: tests/host_sensitivity.py (imported by tests/conftest.py)
records each reference made while a test runs, in its process or a child's, and fails an unmarked
test that made one. These tests run that detector on example tests (pytest's pytester): it must see
a comparison made through a helper, a module fixture, the in-process CLI and a CLI child process,
and leave alone dml_ep's own onnxruntime sessions and marked tests."""

from pathlib import Path

pytest_plugins = ["pytester"]

TESTS = Path(__file__).resolve().parents[1]
MODELS = TESTS.parent / "models"

HELPERS = f'''
import numpy as np

from dml_ep.conformance.compare import compare_model


def check(model):
    """A helper over dml_ep's compare, as the tests' check_both_modes and run_both are."""
    return compare_model(model, {{"input": np.zeros((1, 64), np.float32)}}, reference="ort")
'''

EXAMPLES = f'''
import subprocess
import sys

import numpy as np
import onnx
import pytest

import dml_ep
from dml_ep.numerics.arithmetic import host_saturates_u8s8
from dml_ep.cli.commands import main
from dml_ep.ort.reference import cpu_session
from helpers import check

MLP = {str(MODELS / "mlp.onnx")!r}
SMALL_CNN = {str(MODELS / "small_cnn.onnx")!r}


@pytest.fixture(scope="module")
def reference_values():
    return cpu_session(onnx.load(MLP)).run(None, {{"input": np.zeros((1, 64), np.float32)}})


def test_through_a_helper():
    check(onnx.load(MLP))


def test_through_the_cli_in_process():
    assert main(["compare", MLP, "--quiet"]) in (0, 1)  # the default reference, onnxruntime as deployed


def test_through_a_cli_child():
    subprocess.run([sys.executable, "-m", "dml_ep", "compare", MLP, "--quiet"], check=False)


def test_with_a_session_of_its_own():
    cpu_session(onnx.load(MLP))


def test_reading_the_hosts_saturation():
    assert host_saturates_u8s8() in (True, False)


def test_first_using_a_module_fixture(reference_values):
    assert reference_values


def test_next_using_a_module_fixture(reference_values):
    assert reference_values


@pytest.mark.host_sensitive
def test_marked():
    check(onnx.load(MLP))


def test_running_dml_ep_alone():
    """dml_ep's own sessions (its probes, the integer engine's, a fallback partition's) are no reference."""
    session = dml_ep.InferenceSession(SMALL_CNN, arithmetic="onnxruntime")
    session.run(None, {{"input": np.zeros((1, 3, 32, 32), np.float32)}})
    assert main(["inspect", MLP, "--quiet"]) == 0
'''

# the suite's own conftest.py, under another module name
CONFTEST = f"""
import importlib.util
import sys

sys.path.insert(0, {str(TESTS)!r})
spec = importlib.util.spec_from_file_location("suite_conftest", {str(TESTS / "conftest.py")!r})
suite = importlib.util.module_from_spec(spec)
spec.loader.exec_module(suite)
globals().update({{name: value for name, value in vars(suite).items() if not name.startswith("__")}})
"""


def test_the_detector_sees_each_way_of_comparing(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nmarkers =\n    host_sensitive: compares with the host's onnxruntime\n")
    pytester.makepyfile(helpers=HELPERS, test_examples=EXAMPLES)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    flagged = {line.split("::")[1].split()[0] for line in result.outlines if line.startswith("ERROR test_examples.py::")}
    assert flagged == {"test_through_a_helper", "test_through_the_cli_in_process", "test_through_a_cli_child",
                       "test_with_a_session_of_its_own", "test_reading_the_hosts_saturation",
                       "test_first_using_a_module_fixture", "test_next_using_a_module_fixture"}, result.stdout.str()
    result.assert_outcomes(passed=9, errors=7)
    assert "not marked host_sensitive: mark it @pytest.mark.host_sensitive" in result.stdout.str()
    child = next(line for line in result.outlines if "test_through_a_cli_child" in line and "made" in line)
    assert "compare.run_reference" in child
    result.stdout.fnmatch_lines(["*7 tests compare with the host's onnxruntime without the host_sensitive mark*"])
