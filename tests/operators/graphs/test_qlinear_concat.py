"""com.microsoft QLinearConcat as the DML EP builds it (DmlOperatorQLinearConcat.cpp): one
DEQUANTIZE_LINEAR per input, JOIN on float32, QUANTIZE_LINEAR; against onnxruntime's CPU kernel
(a dequantize-quantize table per input whose parameters differ from the output's)."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import dml_ep
from dml_ep.conformance.compare import compare_model
from dml_ep.operators.nodes import DmlNode
from dml_ep.ort.reference import cpu_session

pytestmark = pytest.mark.host_sensitive  # every test compares with the host's onnxruntime (tests/host_sensitivity.py)

OPERATORS = ["DML_OPERATOR_ELEMENT_WISE_DEQUANTIZE_LINEAR", "DML_OPERATOR_ELEMENT_WISE_DEQUANTIZE_LINEAR", "DML_OPERATOR_JOIN",
             "DML_OPERATOR_ELEMENT_WISE_QUANTIZE_LINEAR"]


def qlinear_concat(dtype, parameters, shapes, axis, output=(0.05, 3), shape_known=True):
    """QLinearConcat of fed inputs ``x<i>`` of ``shapes``, each with its (scale, zero point)."""
    tensor_type = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    names, initializers = ["ys", "yz"], [numpy_helper.from_array(np.float32(output[0]), "ys"), numpy_helper.from_array(dtype(output[1]), "yz")]
    for index, (scale, zero_point) in enumerate(parameters):
        names += [f"x{index}", f"s{index}", f"z{index}"]
        initializers += [numpy_helper.from_array(np.float32(scale), f"s{index}"), numpy_helper.from_array(dtype(zero_point), f"z{index}")]
    inputs = [helper.make_tensor_value_info(f"x{i}", tensor_type, shape) for i, shape in enumerate(shapes)]
    nodes = [helper.make_node("QLinearConcat", names, ["y"], domain="com.microsoft", axis=axis, name="concat")]
    if not shape_known:  # each input reshaped by a shape fed at run time: its rank is unknown before a run
        inputs.append(helper.make_tensor_value_info("shape", TensorProto.INT64, [None]))
        nodes[:0] = [helper.make_node("Reshape", [f"x{i}", "shape"], [f"r{i}"]) for i in range(len(shapes))]
        nodes[-1].input[2::3] = [f"r{i}" for i in range(len(shapes))]
    graph = helper.make_graph(nodes, "qconcat", inputs, [helper.make_tensor_value_info("y", tensor_type, None)], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)], ir_version=8)
    info = np.iinfo(dtype)
    rng = np.random.default_rng(7)
    return model, {f"x{i}": rng.integers(info.min, info.max + 1, shape).astype(dtype) for i, shape in enumerate(shapes)}


@pytest.mark.host_sensitive
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("parameters", [[(0.05, 3), (0.05, 3)], [(0.1, 7), (0.023, 0)], [(0.05, 3), (0.0371, 11), (1.7, 2)]])
def test_bit_exact_with_onnxruntime_and_planned_as_the_eps_graph(dtype, parameters):
    shapes = [(2, 3, 4), (2, 5, 4), (2, 1, 4)][:len(parameters)]
    model, feeds = qlinear_concat(dtype, parameters, shapes, axis=1)
    session = dml_ep.InferenceSession(model, arithmetic="onnxruntime")
    np.testing.assert_array_equal(session.run(None, feeds)[0], cpu_session(model).run(None, feeds)[0], strict=True)
    entries = session.plan.entries
    assert all(isinstance(e, DmlNode) for e in entries)
    assert [e.operator for e in entries] == OPERATORS[:2] + OPERATORS[1:2] * (len(parameters) - 2) + OPERATORS[2:]
    assert all(e.origin is entries[-1].origin and e.origin.nodes[0].name == "concat" for e in entries)


@pytest.mark.host_sensitive
def test_split_where_the_ranks_are_known_only_when_run():
    """Inputs of unknown shape (silero-vad's QLinearConcat reads If outputs): split anyway, each
    part planned from the run's shapes."""
    model, feeds = qlinear_concat(np.uint8, [(0.1, 7), (0.023, 0)], [(1, 2, 8), (1, 2, 8)], axis=0, shape_known=False)
    feeds["shape"] = np.array([2, 8], np.int64)
    session = dml_ep.InferenceSession(model, arithmetic="onnxruntime")
    np.testing.assert_array_equal(session.run(None, feeds)[0], cpu_session(model).run(None, feeds)[0], strict=True)
    assert [e.operator for e in session.plan.entries] == ["DML_OPERATOR_ELEMENT_WISE_IDENTITY"] * 2 + OPERATORS


def test_compare_per_node_runs_the_parts_together():
    """The parts' inputs between them are dml_ep's own, so compare runs the four on onnxruntime's
    inputs and judges the last, whose output is the node's."""
    model, feeds = qlinear_concat(np.uint8, [(0.1, 7), (0.023, 0)], [(2, 3), (2, 5)], axis=-1)
    report = compare_model(model, feeds, arithmetic="onnxruntime", per_node=True)
    *parts, quantize = report.nodes
    assert all(part.isolated is None for part in parts)
    assert quantize.isolated is not None and quantize.isolated.differing == 0 and report.ok
