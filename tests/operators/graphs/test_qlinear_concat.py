"""com.microsoft QLinearConcat as the DML EP builds it (DmlOperatorQLinearConcat.cpp): one
DEQUANTIZE_LINEAR per input, JOIN on float32, QUANTIZE_LINEAR; against onnxruntime's CPU kernel
(a dequantize-quantize table per input whose parameters differ from the output's)."""

import numpy as np
import pytest

import dml_ep
from dml_ep.conformance.compare import compare_model
from dml_ep.operators.nodes import DmlNode
from dml_ep.ort.reference import cpu_session
from onnx_builders import qlinear_concat

pytestmark = pytest.mark.host_sensitive  # every test compares with the host's onnxruntime (tests/host_sensitivity.py)

OPERATORS = ["DML_OPERATOR_ELEMENT_WISE_DEQUANTIZE_LINEAR", "DML_OPERATOR_ELEMENT_WISE_DEQUANTIZE_LINEAR", "DML_OPERATOR_JOIN",
             "DML_OPERATOR_ELEMENT_WISE_QUANTIZE_LINEAR"]


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
