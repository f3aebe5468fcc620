"""Add (integers), Sub, Mul and Div on DirectML's ELEMENT_WISE_ADD, _SUBTRACT, _MULTIPLY and
_DIVIDE: every type of the DML EP's rows against onnxruntime's CPU EP, and the integer semantics
against hand-computed values (wraparound, quotients truncated toward zero)."""

from __future__ import annotations

import numpy as np
import pytest

import dml_ep
from dml_ep.core.errors import NodeError
from dml_ep.operators.element_wise_arithmetic import DIVISION, ROUNDED
from dml_ep.operators.registration import operator_of
from onnx_builders import Feed, planned_node, run_ort, single_node_model

RNG = np.random.default_rng(60)
INTEGERS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]
OPERATORS = {"Add": "ELEMENT_WISE_ADD", "Sub": "ELEMENT_WISE_SUBTRACT", "Mul": "ELEMENT_WISE_MULTIPLY", "Div": "ELEMENT_WISE_DIVIDE"}


def bits(shape, dtype) -> np.ndarray:
    """Random values over the whole range of an integer type."""
    unsigned = np.dtype(f"u{np.dtype(dtype).itemsize}")
    return RNG.integers(0, np.iinfo(unsigned).max, shape, dtype=unsigned, endpoint=True).view(dtype)


def run(op_type, a, b):
    return planned_node(op_type, [a, b], a.dtype)


@pytest.mark.host_sensitive
@pytest.mark.parametrize("dtype", INTEGERS)
@pytest.mark.parametrize("op_type", OPERATORS)
def test_integer_arithmetic_matches_onnxruntime_over_the_whole_range(op_type, dtype):
    a, b = bits((3, 1, 40), dtype), bits((5, 1), dtype)  # broadcast both ways
    if op_type == "Div":
        b[b == 0] = 7
        if np.dtype(dtype).kind == "i":
            a[a == np.iinfo(dtype).min] = 1  # INT_MIN / -1 traps in onnxruntime's x86 division
    session, entry, model, feeds = run(op_type, a, b)
    assert entry.operator == f"DML_OPERATOR_{OPERATORS[op_type]}"
    assert entry.desc.OutputTensor.DataType.name == np.dtype(dtype).name.upper()
    ours = session.run(None, feeds)[0]
    theirs = run_ort(model, feeds, "ort")
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours, theirs)


def test_integers_wrap_around_in_twos_complement():
    a = np.array([127, -128, 100, 2**62], np.int64)
    session, *_ = run("Mul", a.astype(np.int8)[:3], np.array([2, 2, 3], np.int8))
    np.testing.assert_array_equal(session.run(None, {"in0": a.astype(np.int8)[:3], "in1": np.array([2, 2, 3], np.int8)})[0],
                                  np.array([-2, 0, 44], np.int8))  # 254, -256, 300 modulo 256
    big = np.array([2**62, -(2**63)], np.int64)
    session, *_ = run("Sub", big, np.array([-(2**62), 1], np.int64))
    np.testing.assert_array_equal(session.run(None, {"in0": big, "in1": np.array([-(2**62), 1], np.int64)})[0],
                                  np.array([-(2**63), 2**63 - 1], np.int64))


def test_integer_division_truncates_toward_zero():
    a = np.array([7, -7, 7, -7, 6, -6, 0], np.int32)
    b = np.array([2, 2, -2, -2, -3, 4, -5], np.int32)
    session, *_ = run("Div", a, b)
    np.testing.assert_array_equal(session.run(None, {"in0": a, "in1": b})[0], np.array([3, -3, -3, 3, -2, -1, 0], np.int32))


def test_an_integer_division_by_zero_raises_a_typed_error():
    a, b = np.array([1, 2], np.int64), np.array([1, 0], np.int64)
    session, *_ = run("Div", a, b)
    with pytest.raises(NodeError, match="division by zero"):
        session.run(None, {"in0": a, "in1": b})


@pytest.mark.parametrize("op_type", ["Sub", "Mul", "Div"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_floats_are_the_correctly_rounded_operation(op_type, dtype):
    a = RNG.standard_normal((4, 50)).astype(dtype)
    b = (RNG.standard_normal(50) + 3).astype(dtype)
    session, *_ = run(op_type, a, b)
    exact = {"Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}[op_type](a.astype(np.float64), b.astype(np.float64)).astype(dtype)
    np.testing.assert_array_equal(session.run(None, {"in0": a, "in1": b})[0], exact)


def test_integer_outputs_are_exact_and_float_ones_have_a_device_envelope():
    _, integer, *_ = run("Sub", np.ones(3, np.int64), np.ones(3, np.int64))
    _, div, *_ = run("Div", np.ones(3, np.float16), np.ones(3, np.float16))
    _, mul, *_ = run("Mul", np.ones(3, np.float32), np.ones(3, np.float32))
    for entry, exact, precision in ((integer, True, None), (div, False, DIVISION), (mul, False, ROUNDED)):
        operator = operator_of(entry.desc)
        assert operator.exact_for_any_input(entry.desc) is exact
        assert operator.device_precision(entry.desc) is precision
    assert "D3D11.3" in DIVISION.rule and DIVISION.ulp32 == 2 and ROUNDED.ulp16 == 1


def test_an_integer_sub_below_its_feature_level_falls_back():
    """INT64 SUBTRACT is DirectML's from DML_FEATURE_LEVEL_4_1."""
    model, _ = single_node_model("Sub", [Feed(np.ones(3, np.int64)), Feed(np.ones(3, np.int64))], np.int64, 1)
    entry, = dml_ep.InferenceSession(model, feature_level="4_0").plan.entries
    assert "INT64 is not supported at DML_FEATURE_LEVEL_4_0" in entry.reason
