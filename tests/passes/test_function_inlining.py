"""Function ops: kept whole where the DML EP takes them, inlined as onnxruntime inlines them otherwise."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import dml_ep
from dml_ep.passes import EditableGraph, onnxruntime_fusions
from dml_ep.passes.function_inlining import inlined_on_cpu
from dml_ep.passes.onnxruntime_fusions import INLINING
from dml_ep.planning.planner import plan_model
from dml_ep.ort.reference import cpu_session
from onnx_builders import Feed, make, single_node_model


def softmax_between(dtype=TensorProto.FLOAT16):
    """Add -> Softmax -> Mul: a Softmax the CPU EP runs on float32 neighbours (InsertCastTransformer's Casts)."""
    nodes = [helper.make_node("Add", ["a", "a"], ["x"]), helper.make_node("Softmax", ["x"], ["y"], axis=-1),
             helper.make_node("Mul", ["y", "y"], ["z"])]
    return make(nodes, [helper.make_tensor_value_info("a", dtype, [2, 3, 8])], [helper.make_tensor_value_info("z", dtype, None)], opset=13)


def softmax_after_a_contrib_op():
    """com.microsoft Gelu -> Softmax, float16: a value onnx's own inference cannot type."""
    nodes = [helper.make_node("Gelu", ["a"], ["x"], domain="com.microsoft"), helper.make_node("Softmax", ["x"], ["y"], axis=-1)]
    model = make(nodes, [helper.make_tensor_value_info("a", TensorProto.FLOAT16, [2, 8])], [helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)],
                 opset=13)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model


def plan_ops(model, shapes):
    return [(entry.node.op_type, getattr(entry, "operator", None)) for entry in plan_model(model, input_shapes=shapes).entries]


def test_a_float16_softmax_is_one_softmax1_as_the_dml_ep_receives_it():
    x = np.random.default_rng(0).standard_normal((2, 4, 8)).astype(np.float16)
    model, _ = single_node_model("Softmax", [Feed(x)], np.float16, 3, opset=13, axis=-1)
    assert plan_ops(model, {"in0": x.shape}) == [("Softmax", "DML_OPERATOR_ACTIVATION_SOFTMAX1")]


def test_a_float16_softmax_between_nodes_the_cpu_runs_in_float32_stays_whole():
    plan = plan_model(softmax_between(), input_shapes={"a": (2, 3, 8)})
    assert [(e.node.op_type, list(e.node.input), list(e.node.output)) for e in plan.entries] == [
        ("Add", ["a", "a"], ["x"]), ("Softmax", ["x"], ["y"]), ("Mul", ["y", "y"], ["z"])]
    assert all(isinstance(e, dml_ep.operators.nodes.DmlNode) for e in plan.entries)


@pytest.mark.parametrize("op_type, opset, second, operator", [
    ("Relu", 14, None, "DML_OPERATOR_ACTIVATION_RELU"),  # a float16 T5's feed-forward
    ("LeakyRelu", 16, None, "DML_OPERATOR_ACTIVATION_LEAKY_RELU"),
    ("GreaterOrEqual", 16, np.zeros(8, np.float16), "DML_OPERATOR_ELEMENT_WISE_LOGICAL_GREATER_THAN_OR_EQUAL"),  # LongRoPE's
])
def test_other_float16_function_ops_the_cpu_ep_lacks_stay_whole(op_type, opset, second, operator):
    x = np.ones((2, 8), np.float16)
    operands = [Feed(x)] + ([] if second is None else [second])
    model, _ = single_node_model(op_type, operands, np.bool_ if second is not None else np.float16, 2, opset=opset)
    assert plan_ops(model, {"in0": x.shape}) == [(op_type, operator)]


def test_a_float16_contrib_gelu_and_the_softmax_reading_it_stay_whole():
    """com.microsoft Gelu has a function body in onnxruntime's own schemas, which the CPU inlines for float16."""
    assert plan_ops(softmax_after_a_contrib_op(), {"a": (2, 8)}) == [("Gelu", "DML_OPERATOR_ACTIVATION_GELU"),
                                                                   ("Softmax", "DML_OPERATOR_ACTIVATION_SOFTMAX1")]


def test_the_cpu_session_alone_inlines_it():
    """The reason for the pass: onnxruntime's CPU session, with no float16 Softmax kernel, expands it."""
    graph = EditableGraph(softmax_between())
    assert [n.op_type for n in inlined_on_cpu(graph)] == ["Softmax"]
    onnxruntime_fusions(graph, 2, taken_whole=lambda nodes: [])
    assert [n.op_type for n in graph.nodes] == ["Add", "ReduceMax", "Sub", "Exp", "ReduceSum", "Div", "Mul"]


def test_a_float32_softmax_is_no_candidate():
    assert inlined_on_cpu(EditableGraph(softmax_between(TensorProto.FLOAT))) == []


def test_an_op_the_dml_ep_has_no_kernel_for_is_inlined_as_in_the_real_ep():
    """HardSwish: no DML kernel, no float16 CPU kernel: onnxruntime inlines it (HardSigmoid, Mul) for both EPs."""
    x = np.ones((2, 8), np.float16)
    model, _ = single_node_model("HardSwish", [Feed(x)], np.float16, 2, opset=14)
    assert [op for op, _ in plan_ops(model, {"in0": x.shape})] == ["HardSigmoid", "Mul"]


def test_a_body_inlined_for_no_ep_is_partitioned_afresh():
    """SequenceMap (no DML kernel) is inlined into SequenceEmpty, SequenceLength and a Loop, which the DML EP has no
    kernel for either: the real EP leaves the Loop to the CPU (InlineNodes, then partitioning again); no QDQ or fusion
    rule made it for a DML node, so it is no session-initialization failure."""
    seq = helper.make_tensor_sequence_value_info
    body = helper.make_graph([helper.make_node("Add", ["a", "b"], ["c"])], "body",
                             [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in "ab"],
                             [helper.make_tensor_value_info("c", TensorProto.FLOAT, [3])])
    node = helper.make_node("SequenceMap", ["x0", "x1"], ["y0"], body=body)
    model = make([node], [seq("x0", TensorProto.FLOAT, [3]), seq("x1", TensorProto.FLOAT, [3])], [seq("y0", TensorProto.FLOAT, [3])])
    loop, = [e for e in plan_model(model).entries if e.node.op_type == "Loop"]
    assert loop.kind == "no-kernel" and loop.origin.rules == (INLINING,)


def test_a_float16_log_softmax_stays_whole_on_its_dml_kernel():
    x = np.ones((2, 8), np.float16)
    model, _ = single_node_model("LogSoftmax", [Feed(x)], np.float16, 2, opset=13)
    entries = plan_model(model, input_shapes={"in0": x.shape}).entries
    assert [(e.node.op_type, e.kind) for e in entries] == [("LogSoftmax", "not-modelled")]


@pytest.mark.host_sensitive
@pytest.mark.parametrize("arithmetic", ["onnxruntime", "directml"])
def test_the_kept_softmax_runs_against_onnxruntimes_inlined_chain(arithmetic):
    """onnxruntime's reference runs the inlined float32 chain; the SOFTMAX1 kernel's "onnxruntime"
    arithmetic reproduces it bit for bit, the "directml" one within a few float16 units."""
    x = np.random.default_rng(1).standard_normal((2, 3, 37)).astype(np.float16)
    model, feeds = single_node_model("Softmax", [Feed(x)], np.float16, 3, opset=13, axis=-1)
    expected = cpu_session(model, threads=1).run(None, feeds)[0]
    session = dml_ep.InferenceSession(model, arithmetic=arithmetic)
    ours = session.run(None, feeds)[0]
    assert [e.operator for e in session.executor.plan.entries] == ["DML_OPERATOR_ACTIVATION_SOFTMAX1"]
    if arithmetic == "onnxruntime":
        np.testing.assert_array_equal(ours.view(np.uint16), expected.view(np.uint16))
    else:
        np.testing.assert_allclose(ours.astype(np.float32), expected.astype(np.float32), rtol=4e-3, atol=1e-4)


@pytest.mark.host_sensitive
def test_between_nodes_the_reference_keeps_float32_where_dml_ep_rounds_to_float16():
    """Add -> Softmax -> Mul: the CPU EP runs all three in float32 (InsertCastTransformer's Casts
    between them removed), the DML EP each in float16: they differ by float16 roundings, no more."""
    a = np.random.default_rng(1).standard_normal((2, 3, 8)).astype(np.float16)
    model = softmax_between()
    expected = cpu_session(model, threads=1).run(None, {"a": a})[0].astype(np.float32)
    ours = dml_ep.InferenceSession(model, arithmetic="onnxruntime").run(None, {"a": a})[0].astype(np.float32)
    np.testing.assert_allclose(ours, expected, rtol=2e-3, atol=1e-5)


@pytest.mark.host_sensitive
def test_a_float16_gelu_20_is_inlined_with_float16_constants():
    """No DML kernel for ai.onnx Gelu: onnxruntime inlines it for both EPs, its body's constants
    float16 (the CPU session's InsertCastTransformer made them float32 in place)."""
    x = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float16)
    model, feeds = single_node_model("Gelu", [Feed(x)], np.float16, 2, opset=20)
    session = dml_ep.InferenceSession(model, arithmetic="onnxruntime")
    ours = session.run(None, feeds)[0]
    assert [e.node.op_type for e in session.executor.plan.entries] == ["Mul", "Sqrt", "Div", "Erf", "Sum", "Mul"]
    given = session.executor.plan.constants
    constants = [given[name] for e in session.executor.plan.entries for name in e.node.input if name.startswith("_inlfunc_") and name in given]
    assert constants and all(c.dtype == np.float16 for c in constants)
    expected = cpu_session(model, threads=1).run(None, feeds)[0]  # the chain in float32, rounded once
    assert ours.dtype == np.float16
    np.testing.assert_allclose(ours.astype(np.float32), expected.astype(np.float32), rtol=2e-3, atol=1e-3)
