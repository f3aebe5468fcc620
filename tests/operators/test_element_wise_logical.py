"""Equal, Greater, Less, GreaterOrEqual, LessOrEqual, Not, And, Or, Xor on DirectML's
ELEMENT_WISE_LOGICAL_*: every type of the DML EP's rows against onnxruntime's CPU EP, the float
special values (NaN, signed zeros, infinities) against IEEE's answers, and the bool output as UINT8."""

from __future__ import annotations

import numpy as np
import pytest

import dml_ep
from onnx_builders import Feed, planned_node, run_ort, single_node_model

RNG = np.random.default_rng(61)
TYPES = [np.float16, np.float32, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]
COMPARISONS = {"Equal": ("EQUALS", np.equal), "Greater": ("GREATER_THAN", np.greater), "Less": ("LESS_THAN", np.less),
               "GreaterOrEqual": ("GREATER_THAN_OR_EQUAL", np.greater_equal), "LessOrEqual": ("LESS_THAN_OR_EQUAL", np.less_equal)}
BOOLEAN = {"And": ("AND", np.logical_and), "Or": ("OR", np.logical_or), "Xor": ("XOR", np.logical_xor)}


def planned(op_type, *operands, opset=19):
    return planned_node(op_type, operands, np.bool_, opset=opset)


@pytest.mark.host_sensitive
@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("op_type", COMPARISONS)
def test_comparisons_match_onnxruntime(op_type, dtype):
    a = RNG.integers(-4, 5, (3, 1, 6)).astype(dtype)  # small values: many ties, both broadcast ways
    b = RNG.integers(-4, 5, (5, 1)).astype(dtype)
    session, entry, model, feeds = planned(op_type, a, b)
    assert entry.operator == f"DML_OPERATOR_ELEMENT_WISE_LOGICAL_{COMPARISONS[op_type][0]}"
    assert entry.desc.OutputTensor.DataType.name == "UINT8"
    ours = session.run(None, feeds)[0]
    assert ours.dtype == np.bool_
    np.testing.assert_array_equal(ours, run_ort(model, feeds, "ort"))


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("op_type", COMPARISONS)
def test_float_comparisons_follow_ieee(op_type, dtype):
    """NaN compares false, -0 equals +0, infinities order, the smallest subnormal is above zero."""
    special = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, np.finfo(dtype).smallest_subnormal, 1.0], dtype)
    a, b = np.meshgrid(special, special, indexing="ij")
    session, _, _, feeds = planned(op_type, a, b)
    np.testing.assert_array_equal(session.run(None, feeds)[0], COMPARISONS[op_type][1](a, b))


def test_64_bit_integers_compare_exactly():
    """2**62 + 1 and 2**62 are one float but two int64s."""
    a, b = np.array([2**62 + 1, -(2**63)], np.int64), np.array([2**62, 2**63 - 1], np.int64)
    session, _, _, feeds = planned("Greater", a, b)
    np.testing.assert_array_equal(session.run(None, feeds)[0], [True, False])


@pytest.mark.host_sensitive
@pytest.mark.parametrize("op_type", [*BOOLEAN, "Not"])
def test_boolean_logic_matches_onnxruntime(op_type):
    a, b = RNG.integers(0, 2, (4, 1, 3)).astype(bool), RNG.integers(0, 2, (5, 3)).astype(bool)
    operands = (a,) if op_type == "Not" else (a, b)
    session, entry, model, feeds = planned(op_type, *operands)
    assert entry.operator == f"DML_OPERATOR_ELEMENT_WISE_LOGICAL_{BOOLEAN.get(op_type, ('NOT',))[0]}"
    ours = session.run(None, feeds)[0]
    expected = np.logical_not(a) if op_type == "Not" else BOOLEAN[op_type][1](a, b)
    np.testing.assert_array_equal(ours, expected)
    np.testing.assert_array_equal(ours, run_ort(model, feeds, "ort"))


def test_greater_or_equal_needs_feature_level_3_0():
    a = np.zeros(3, np.float32)
    model, _ = single_node_model("GreaterOrEqual", [Feed(a), Feed(a)], np.bool_, 1)
    entry, = dml_ep.InferenceSession(model, feature_level="2_1").plan.entries
    assert "requires DML_FEATURE_LEVEL_3_0" in entry.reason


def test_an_integer_equal_of_opset_7_is_the_cpu_eps():
    """Equal-7's row is float only in the real EP."""
    a = np.zeros(3, np.int32)
    _, entry, _, _ = planned("Equal", a, a, opset=7)
    assert entry.reason.endswith("on the CPU in the real EP too")
