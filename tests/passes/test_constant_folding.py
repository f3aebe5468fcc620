"""Constant nodes and what onnxruntime's ConstantFolding computes at load never reach an EP: they
are not in the plan, not counted, and the values they make are constants (T5 exports have 268 and
500 Constant nodes, which were listed as "on DirectML in the real EP, not modelled")."""

import numpy as np
import pytest
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import dml_ep
from dml_ep.ort.reference import cpu_session

pytestmark = pytest.mark.host_sensitive  # every test compares with the host's onnxruntime (tests/host_sensitivity.py)


def model_of(nodes, initializers, opset=17):
    graph = helper.make_graph(nodes, "folding", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def planned(model, sess_options=None):
    session = dml_ep.InferenceSession(model, sess_options)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    ours = session.run(None, {"x": x})[0]
    np.testing.assert_array_equal(ours, cpu_session(model).run(None, {"x": x})[0])
    return [entry.node.op_type for entry in session.plan.entries], session.plan.summary()


def test_constant_nodes_are_initializers():
    nodes = [helper.make_node("Constant", [], ["b"], value=numpy_helper.from_array(np.float32([1, 2, 3]))),
             helper.make_node("Constant", [], ["two"], value_float=2.0),
             helper.make_node("Mul", ["x", "two"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["y"])]
    ops, summary = planned(model_of(nodes, []))
    assert ops == ["Mul", "Add"]
    assert summary["model_nodes"] == 2


def test_nodes_of_constants_are_folded():
    """Transpose(w) -> Neg feeding an Add: folded; the Add (ELEMENT_WISE_ADD1) reads a constant."""
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(3, 2), "w")
    nodes = [helper.make_node("Transpose", ["w"], ["wt"]), helper.make_node("Neg", ["wt"], ["b"]), helper.make_node("Add", ["x", "b"], ["y"])]
    ops, summary = planned(model_of(nodes, [w]))
    assert ops == ["Add"]
    assert summary["dml"]["nodes"] == 1 and summary["fallback"]["nodes"] == 0


def test_a_graph_input_with_an_initializer_is_not_folded():
    """An initializer also listed as an input may be fed: onnxruntime does not fold what reads it."""
    model = model_of([helper.make_node("Neg", ["w"], ["b"]), helper.make_node("Add", ["x", "b"], ["y"])],
                     [numpy_helper.from_array(np.ones((2, 3), np.float32), "w")])
    model.graph.input.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, [2, 3]))
    ops, _ = planned(model)
    assert ops == ["Neg", "Add"]


def weight_dq_model(with_unit=False):
    """A constant int8 weight, DequantizeLinear'd (-> Transpose -> QuantizeLinear -> DequantizeLinear
    with ``with_unit``), added to x."""
    initializers = [numpy_helper.from_array(np.int8([[1, -2, 3], [4, 5, -6]]), "wq"), numpy_helper.from_array(np.float32(0.5), "s"),
                    numpy_helper.from_array(np.int8(0), "z")]
    if with_unit:
        initializers[0] = numpy_helper.from_array(np.int8([[1, 4], [-2, 5], [3, -6]]), "wq")
        nodes = [helper.make_node("DequantizeLinear", ["wq", "s", "z"], ["w0"]), helper.make_node("Transpose", ["w0"], ["wt"]),
                 helper.make_node("QuantizeLinear", ["wt", "s", "z"], ["wq2"]), helper.make_node("DequantizeLinear", ["wq2", "s", "z"], ["w"])]
    else:
        nodes = [helper.make_node("DequantizeLinear", ["wq", "s", "z"], ["w"])]
    return model_of([*nodes, helper.make_node("Add", ["x", "w"], ["y"])], initializers)


def test_dequantize_linear_stays_unless_qdq_is_off():
    ops, _ = planned(weight_dq_model())
    assert ops == ["DequantizeLinear", "Add"]
    off = ort.SessionOptions()
    off.add_session_config_entry("session.disable_quant_qdq", "1")
    ops, _ = planned(weight_dq_model(), off)
    assert ops == ["Add"]


def test_a_whole_constant_qdq_unit_is_folded():
    """DQ -> Transpose -> Q on a constant folds as a unit; the last DQ stays (QDQ fusion on)."""
    ops, _ = planned(weight_dq_model(with_unit=True))
    assert ops == ["DequantizeLinear", "Add"]
