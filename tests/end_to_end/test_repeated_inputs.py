"""Nodes that read one value in several slots, through every release's passes.

``y = Relu(x + x)`` crashed every command (the pass index forgot a node reading a value twice).
Hypothesis builds small graphs whose nodes draw their inputs from a few values with replacement
(so repeats are common): float arithmetic, QDQ groups whose DQ output a node reads twice,
DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul reading one quantized tensor as A and B,
graph inputs read twice and returned as graph outputs. Every graph must plan and run in both
arithmetics under every release (or fail as that release's real EP does, a RealEpError), and compare with onnxruntime must name a cause for each node
that differs in isolation.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import dml_ep
from dml_ep.conformance.compare import compare_model
from dml_ep.core import graph as graph_module
from dml_ep.core.errors import RealEpError
from dml_ep.passes import DML, RELEASES, EditableGraph, dml_operator_fusion
from dml_ep.planning.planner import ALL_OPTIMIZATIONS, onnxruntime_rewrites

SHAPE = [4, 4]
BINARY = ("Add", "Sub", "Mul", "MatMul")


@st.composite
def repeated_input_graphs(draw):
    """A model over two float inputs whose nodes read the values made so far with replacement."""
    values, nodes = ["x", "w"], []
    initializers = [numpy_helper.from_array(np.float32(0.05), "s"), numpy_helper.from_array(np.uint8(128), "zp")]

    def pick():
        return draw(st.sampled_from(values))

    for index in range(draw(st.integers(1, 5))):
        out = f"v{index}"
        kind = draw(st.sampled_from(["binary", "sum", "relu", "qdq", "qdq_group", "dynamic"]))
        if kind == "binary":
            nodes.append(helper.make_node(draw(st.sampled_from(BINARY)), [pick(), pick()], [out]))
        elif kind == "sum":
            nodes.append(helper.make_node("Sum", [pick() for _ in range(draw(st.integers(1, 3)))], [out]))
        elif kind == "relu":
            nodes.append(helper.make_node("Relu", [pick()], [out]))
        elif kind == "qdq":  # Q -> DQ read twice by one node
            source = pick()
            nodes += [helper.make_node("QuantizeLinear", [source, "s", "zp"], [f"{out}_q"]),
                      helper.make_node("DequantizeLinear", [f"{out}_q", "s", "zp"], [f"{out}_dq"]),
                      helper.make_node(draw(st.sampled_from(BINARY)), [f"{out}_dq", f"{out}_dq"], [out])]
        elif kind == "qdq_group":  # DQ -> op(a, a) -> Q -> DQ: a QLinear group with one input twice
            source = pick()
            nodes += [helper.make_node("QuantizeLinear", [source, "s", "zp"], [f"{out}_q"]),
                      helper.make_node("DequantizeLinear", [f"{out}_q", "s", "zp"], [f"{out}_dq"]),
                      helper.make_node(draw(st.sampled_from(("Add", "Mul", "MatMul"))), [f"{out}_dq", f"{out}_dq"], [f"{out}_f"]),
                      helper.make_node("QuantizeLinear", [f"{out}_f", "s", "zp"], [f"{out}_q2"]),
                      helper.make_node("DequantizeLinear", [f"{out}_q2", "s", "zp"], [out])]
        else:  # DynamicQuantizeLinear -> MatMulInteger(a, a) -> Cast -> Mul(scale * scale)
            source = pick()
            nodes += [helper.make_node("DynamicQuantizeLinear", [source], [f"{out}_q", f"{out}_s", f"{out}_z"]),
                      helper.make_node("MatMulInteger", [f"{out}_q", f"{out}_q", f"{out}_z", f"{out}_z"], [f"{out}_i"]),
                      helper.make_node("Cast", [f"{out}_i"], [f"{out}_c"], to=TensorProto.FLOAT),
                      helper.make_node("Mul", [f"{out}_s", f"{out}_s"], [f"{out}_ss"]),
                      helper.make_node("Mul", [f"{out}_c", f"{out}_ss"], [out])]
        values.append(out)
        if draw(st.booleans()):
            nodes.append(helper.make_node("Relu", [out], [f"{out}_relu"]))
            values.append(f"{out}_relu")
    outputs = [values[-1], *draw(st.lists(st.sampled_from(values[:-1]), unique=True, max_size=2))]
    graph = helper.make_graph(
        nodes, "repeated", [helper.make_tensor_value_info(n, TensorProto.FLOAT, SHAPE) for n in ("x", "w")],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, SHAPE) for n in outputs], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


@pytest.mark.host_sensitive
@settings(max_examples=200, derandomize=True, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(repeated_input_graphs(), st.sampled_from(sorted(set(RELEASES))))
def test_repeated_inputs_run_and_compare_under_every_release(model, release):
    rng = np.random.default_rng(0)
    feeds = {n: rng.uniform(-2, 2, SHAPE).astype(np.float32) for n in ("x", "w")}
    try:
        dml_ep.InferenceSession(model, qdq_rules=release).run(None, feeds)
    except RealEpError:
        return  # a graph the real EP of that release fails on (MatMulIntegerToFloat before 1.24), as documented
    report = compare_model(model, feeds, arithmetic="onnxruntime", qdq_rules=release, per_node=True)
    for output in report.outputs:
        assert output.problem is None, output.problem
    unnamed = [n.node for n in report.nodes or () if n.differs_in_isolation and n.cause is None]
    assert not unnamed, f"no cause for {unnamed}"


def test_a_value_read_twice_then_relu_fuses():
    """The case that crashed: Add(x, x) -> Relu, which DirectML fuses into one operator."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph([helper.make_node("Add", ["x", "x"], ["s"]), helper.make_node("Relu", ["s"], ["y"])], "g", [x], [y])
    session = dml_ep.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert [entry.node.op_type for entry in session.plan.entries] == ["DmlFusedAdd"]
    feed = np.array([[-1, 0, 2], [3, -4, 0.5]], np.float32)
    np.testing.assert_array_equal(session.run(None, {"x": feed})[0], np.maximum(feed + feed, 0))


@settings(max_examples=100, derandomize=True, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(repeated_input_graphs(), st.sampled_from(sorted(set(RELEASES))))
def test_the_op_type_census_follows_every_pass(model, release):
    """Passes skip their walk where the graph has no op to start from (EditableGraph.has_op): the
    census must follow every edit, or a pass would miss a node a rule before it made."""
    graph = EditableGraph(graph_module.load_model(model))
    onnxruntime_rewrites(graph, release, DML, ALL_OPTIMIZATIONS, False)
    dml_operator_fusion(graph, lambda node: True)
    present = {node.op_type for node in graph.nodes}
    for op_type in present | {node.op_type for node in model.graph.node} | {"QLinearAdd", "QLinearMatMul", "DmlFusedAdd", "Cast"}:
        assert graph.has_op(op_type) == (op_type in present), op_type
