"""Add / two-input Sum -> ELEMENT_WISE_ADD1, with a Relu or LeakyRelu consumer fused as its
FusedActivation, and float Sub, Mul, Div -> ELEMENT_WISE_SUBTRACT, _MULTIPLY, _DIVIDE, against
onnxruntime's CPU EP.

Each has one correctly rounded answer, so both arithmetic modes must match onnxruntime
bit for bit (float16: the float32 sum rounded once to float16, which is the correctly rounded
float16 sum).
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx_builders import Feed, add, run_ort, single_node_model
from operator_cases import check_both_modes, operands

import dml_ep
from dml_ep.operators.nodes import DmlNode

BROADCASTS = [
    ((17,), (17,)),
    ((17,), (1,)),
    ((1,), (17,)),
    ((3, 5), (5,)),
    ((3, 1), (1, 5)),
    ((2, 3, 4, 5), (1, 3, 1, 1)),
    ((2, 1, 4, 1), (1, 3, 1, 5)),
    ((2, 3, 1, 2, 3), (3, 2, 1)),
    ((2, 1, 3, 1, 2, 1), (1, 2, 1, 3, 1, 2)),
    ((2, 2, 2, 2, 2, 2, 2), (2, 1, 2, 1, 2, 1, 2)),
]
ACTIVATIONS = [
    pytest.param(None, {}, id="none"),
    pytest.param("Relu", {}, id="relu"),
    pytest.param("LeakyRelu", {}, id="leakyrelu-default"),
    pytest.param("LeakyRelu", {"alpha": 0.3}, id="leakyrelu-0.3"),
]


@pytest.mark.host_sensitive
@pytest.mark.parametrize("activation, attributes", ACTIVATIONS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("a_shape, b_shape", BROADCASTS, ids=lambda s: str(list(s)))
def test_add_matches_onnxruntime(a_shape, b_shape, dtype, activation, attributes):
    a, b = operands(a_shape, b_shape, dtype)
    model, feeds = add(a, b, activation=activation, **attributes)
    check_both_modes(model, feeds)


@pytest.mark.host_sensitive
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("a_shape, b_shape", BROADCASTS[::3], ids=lambda s: str(list(s)))
@pytest.mark.parametrize("op_type, operator", [("Sub", "ELEMENT_WISE_SUBTRACT"), ("Mul", "ELEMENT_WISE_MULTIPLY"),
                                               ("Div", "ELEMENT_WISE_DIVIDE")])
def test_sub_mul_div_match_onnxruntime(op_type, operator, a_shape, b_shape, dtype):
    """Sub, Mul and Div share ADD1's import (broadcast as strides of 0) and are each one correctly
    rounded operation: bit for bit with onnxruntime in both arithmetics."""
    a, b = operands(a_shape, b_shape, dtype)
    model, feeds = add(a, b, op_type=op_type)
    [entry] = dml_ep.InferenceSession(model).plan.entries
    assert isinstance(entry, DmlNode) and entry.desc.OPERATOR_TYPE.name == operator
    check_both_modes(model, feeds)


@pytest.mark.host_sensitive
@pytest.mark.parametrize("op_type", ["Sub", "Mul", "Div"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_sub_mul_div_special_values(op_type, dtype):
    """Infinities, NaN, signed zeros, subnormals, overflow and division by zero, as IEEE gives them."""
    info = np.finfo(dtype)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, info.max, -info.max, info.smallest_subnormal, 1.0, -3.0], dtype)
    a, b = np.meshgrid(special, special, indexing="ij")
    model, feeds = add(a, b, op_type=op_type)
    check_both_modes(model, feeds)


def test_an_integer_add_is_the_real_eps_element_wise_add():
    """ADD1 has no integer types: an integer Add is ELEMENT_WISE_ADD, as the real EP builds every plain Add."""
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    model, feeds = add(a, a)
    session = dml_ep.InferenceSession(model)
    np.testing.assert_array_equal(session.run(None, feeds)[0], a + a)
    assert session.plan.entries[0].operator == "DML_OPERATOR_ELEMENT_WISE_ADD"


@pytest.mark.host_sensitive
@pytest.mark.parametrize("activation, attributes", ACTIVATIONS[1:])
@pytest.mark.parametrize("op_type", ["Add", "Sum"])
def test_activation_is_fused(op_type, activation, attributes):
    """The Relu/LeakyRelu becomes ADD1's FusedActivation and leaves the plan."""
    a, b = operands((2, 3, 4), (4,), np.float32)
    model, feeds = add(a, b, op_type=op_type, activation=activation, **attributes)
    session = dml_ep.InferenceSession(model)
    [entry] = session.plan.entries
    assert isinstance(entry, DmlNode) and entry.desc.OPERATOR_TYPE.name == "ELEMENT_WISE_ADD1"
    assert [n.op_type for n in entry.origin.nodes] == [op_type, activation]
    assert entry.origin.rule == "DmlOperatorFusion"
    fused = entry.desc.FusedActivation
    assert fused is not None and fused.OPERATOR_TYPE.name == {"Relu": "ACTIVATION_RELU", "LeakyRelu": "ACTIVATION_LEAKY_RELU"}[activation]
    if activation == "LeakyRelu":
        assert fused.Alpha == pytest.approx(attributes.get("alpha", 0.01))
    check_both_modes(model, feeds)


@pytest.mark.host_sensitive
@pytest.mark.parametrize("activation, attributes", ACTIVATIONS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_special_values(dtype, activation, attributes):
    """Infinities, NaN, signed zeros, subnormals and overflow to infinity."""
    info = np.finfo(dtype)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, info.max, -info.max, info.smallest_subnormal, -info.smallest_subnormal, 1.0, -1.0], dtype)
    a, b = np.meshgrid(special, special, indexing="ij")
    model, feeds = add(a, b, activation=activation, **attributes)
    check_both_modes(model, feeds)


@pytest.mark.host_sensitive
def test_zero_dimensional_output():
    a, b = operands((), (), np.float32)
    model, feeds = add(a, b)
    check_both_modes(model, feeds)


@pytest.mark.host_sensitive
@pytest.mark.parametrize("activation, attributes", [("Relu", {}), ("LeakyRelu", {"alpha": 0.3})])
def test_a_fused_add_meeting_an_empty_batch_runs_unfused_on_onnxruntime(activation, attributes):
    """Batch 0 sends the fused Add + activation to the CPU fallback: onnxruntime runs the Add and
    the activation (it cannot run the DML EP's internal DmlFusedAdd) and returns shape [0, 5]."""
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("Add", ["x", "b"], ["s"]), helper.make_node(activation, ["s"], ["y"], **attributes)]
    graph = helper.make_graph(nodes, "fused", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])],
                              [numpy_helper.from_array(np.arange(5, dtype=np.float32) - 2, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    session = dml_ep.InferenceSession(model)
    for batch in (0, 3):
        x = np.linspace(-3, 3, batch * 5, dtype=np.float32).reshape(batch, 5)
        ours = session.run(None, {"x": x})[0]
        np.testing.assert_array_equal(ours, run_ort(model, {"x": x}, "ort"))
        assert ours.shape == (batch, 5)
        assert session.plan.entries[0].node.op_type == "DmlFusedAdd"


def test_a_double_add_says_the_real_ep_runs_it_on_the_cpu():
    """The real EP registers Add-14 for float16/32 and 8- to 64-bit integers, not double."""
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    model, feeds = add(a, a)
    session = dml_ep.InferenceSession(model)
    np.testing.assert_array_equal(session.run(None, feeds)[0], a + a)
    assert session.plan.entries[0].reason.endswith("the DML kernel takes T in (float, float16, int16, int32, int64, int8, uint16, uint32, "
                                                    "uint64, uint8), not double ('in0'); on the CPU in the real EP too")


@pytest.mark.host_sensitive
def test_a_constant_first_operand():
    """Add(constant, x): the executor once looked the bound array up in a set of value names
    (TypeError: unhashable type) while preparing the session."""
    c, x = operands((2, 3), (2, 3), np.float32)
    model, feeds = single_node_model("Add", [c, Feed(x)], np.float32, 2)
    check_both_modes(model, feeds)
