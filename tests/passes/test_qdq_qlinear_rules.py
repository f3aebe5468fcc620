"""onnxruntime's QDQ rules that make QLinear nodes, as dml_ep emulates them (``dml_ep.passes.qdq_rules``
with ``qdq_selectors`` and ``qdq_actions``): Conv, MatMul, Add/Mul, Gemm, the unary ops and Concat,
one rule condition at a time, and the notes the transformer leaves on a node no rule fuses.

Every rule condition gets a case where it fires and one where it rejects, on the small graphs of
``onnx_builders`` (opset 17, uint8 activations, int8 weights), for nodes on the DML EP unless a test
says otherwise; fused groups are run through dml_ep and onnxruntime for bit-exact outputs. The
expectations are onnxruntime's source (qdq_selector_action_transformer.cc, qdq_selectors.cc,
qdq_actions.cc).
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import dml_ep
from dml_ep.core.errors import RealEpError
from dml_ep.operators.nodes import DmlNode
from dml_ep.ort.reference import cpu_session
from dml_ep.passes import CPU
from dml_ep.planning.planner import plan_model
from onnx_builders import (ALL_RULE_SETS, CONV_WEIGHT, F32, MS, S8, U8, U16, Graph, binary_model, concat_model,
                           conv_model, gemm_model, matmul_model, names, node, ops, rewrite, unary_model, unfused)


# --- Conv -----------------------------------------------------------------------------------------


def test_conv_fires_into_qlinearconv():
    """ConvReplaceWithQLinear: onnx-domain QLinearConv named after the Conv, producing the Q's
    output tensor, with inputs [x, x_s, x_zp, w, w_s, w_zp, y_s, y_zp, int32 bias]; SafelyRemoveNodes
    removes the three DQs, the Conv and the Q."""
    graph = rewrite(conv_model())
    assert ops(graph) == [("QLinearConv", "")]
    [qconv] = graph.nodes
    assert qconv.name == "conv" and list(qconv.output) == ["y"]
    assert list(qconv.input) == ["x", "x_dq_scale", "x_dq_zp", "w", "w_dq_scale", "w_dq_zp", "y_scale", "y_zp", "bias"]
    assert [(a.name, list(a.ints)) for a in qconv.attribute] == [("pads", [1, 1, 1, 1])]
    origin = graph.origin(qconv)
    assert names(origin.nodes) == ["b_dq", "conv", "w_dq", "x_dq", "y"]
    assert origin.rules == ("Conv",) and origin.note is None


@pytest.mark.parametrize("int8_allowed", [False, True])
def test_conv_int8_activations_need_int8_allowed(int8_allowed):
    """ConvNodeGroupSelector: an int8 input is fused only with session.qdqisint8allowed=1 (default 0
    on x86-64) and int8 weights; QDQS8ToU8Transformer is CPU-only, so a DML node stays unfused."""
    graph = rewrite(conv_model(x_type=S8), int8_allowed=int8_allowed)
    if int8_allowed:
        assert ops(graph) == [("QLinearConv", "")]
    else:
        assert unfused(graph, "Conv")
        assert "qdqisint8allowed" in graph.origin(node(graph, "Conv")).note


def test_conv_int8_activations_need_int8_weights():
    """ConvNodeGroupSelector: int8 activations with uint8 weights are refused even when int8 is allowed."""
    graph = rewrite(conv_model(x_type=S8, w_type=U8), int8_allowed=True)
    assert unfused(graph, "Conv")


def test_conv_uint8_activations_take_uint8_weights():
    """ConvNodeGroupSelector: uint8 activations may have uint8 or int8 weights."""
    graph = rewrite(conv_model(w_type=U8, weight=np.abs(CONV_WEIGHT)))
    assert ops(graph) == [("QLinearConv", "")]


@pytest.mark.parametrize(
    "kwargs, reason",
    [
        pytest.param({"x_type": U16, "domain": MS}, "16-bit", id="uint16"),
        pytest.param({"bias": "int8"}, "not int32", id="int8-bias"),
        pytest.param({"conv_is_output": True}, "graph output", id="conv-graph-output"),
        pytest.param({"other_consumer": True}, "QuantizeLinear and other nodes", id="conv-feeds-q-and-other"),
    ],
)
def test_conv_rejects(kwargs, reason):
    """ConvNodeGroupSelector / CheckQDQNodes: 16-bit Q/DQ types are not fused; a bias DQ must read
    int32; the Conv must not produce a graph output; its output must feed Qs only."""
    graph = rewrite(conv_model(**kwargs))
    assert unfused(graph, "Conv")
    assert reason in graph.origin(node(graph, "Conv")).note


def test_conv_without_bias_fires():
    """ConvNodeGroupSelector takes 2 DQs (X, W) as well as 3; QLinearConv then has 8 inputs."""
    graph = rewrite(conv_model(bias=None))
    assert ops(graph) == [("QLinearConv", "")] and len(graph.nodes[0].input) == 8


# --- A node without a DQ input --------------------------------------------------------------------


def test_a_node_without_a_dq_input_gets_no_note():
    """Every selector needs a DQ input: a float Add that only feeds a Q is no QDQ group, and its row
    carries no QDQ note (a float model's every Add used to get one)."""
    g = Graph()
    x = g.input("x", F32, [1, 4])
    total = g.node("Add", [x, g.const("c", np.ones((1, 4), F32))], "total")
    g.node("QuantizeLinear", [total, g.const("s", F32(0.1)), g.const("z", U8(128))], "q")
    g.output("q", U8, [1, 4])
    graph = rewrite(g.model())
    assert graph.origin(node(graph, "Add")).note is None


# --- MatMul ---------------------------------------------------------------------------------------


def test_matmul_with_q_fires_into_qlinearmatmul():
    """MatMulReplaceWithQLinear: with a Q, onnx-domain QLinearMatMul [a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp]."""
    graph = rewrite(matmul_model())
    assert ops(graph) == [("QLinearMatMul", "")]
    [qmm] = graph.nodes
    assert qmm.name == "matmul" and list(qmm.output) == ["y"]
    assert list(qmm.input) == ["a", "a_dq_scale", "a_dq_zp", "b", "b_dq_scale", "b_dq_zp", "y_scale", "y_zp"]
    assert names(graph.origin(qmm).nodes) == ["a_dq", "b_dq", "matmul", "y"]


def test_matmul_without_q_becomes_matmulintegertofloat():
    """MatMulNodeGroupSelector without a Q: matmulintegertofloat_allowed, so com.microsoft
    MatMulIntegerToFloat [A, B, a_s, b_s, a_zp, b_zp] producing the MatMul's own float output."""
    graph = rewrite(matmul_model(tail="none"))
    assert ops(graph) == [("MatMulIntegerToFloat", MS)]
    [mm] = graph.nodes
    assert list(mm.output) == ["mm_out"]
    assert list(mm.input) == ["a", "b", "a_dq_scale", "b_dq_scale", "a_dq_zp", "b_dq_zp"]


def test_matmul_with_q_and_another_consumer_rejected():
    """With a Q, CheckQDQNodes must pass: the MatMul output may not feed a Q and another node, and
    there is no fallback to MatMulIntegerToFloat."""
    graph = rewrite(matmul_model(tail="q+other"))
    assert unfused(graph, "MatMul")
    assert "QuantizeLinear and other nodes" in graph.origin(node(graph, "MatMul")).note


# --- Add, Mul, Gemm -------------------------------------------------------------------------------


def test_add_fires_on_dml_by_2dq_dml():
    """The "2DQ_DML" rule (Add only, DML only): com.microsoft QLinearAdd
    [a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp]."""
    graph = rewrite(binary_model("Add"))
    assert ops(graph) == [("QLinearAdd", MS)]
    [qadd] = graph.nodes
    assert list(qadd.input) == ["a", "a_dq_scale", "a_dq_zp", "b", "b_dq_scale", "b_dq_zp", "y_scale", "y_zp"]
    assert list(qadd.output) == ["y"] and graph.origin(qadd).rules == ("2DQ_DML",)


def test_add_with_different_input_types_rejected():
    """BinaryNodeGroupSelector: both inputs and the output must have one quantized type."""
    graph = rewrite(binary_model("Add", b_type=S8))
    assert unfused(graph, "Add")
    assert "input types differ" in graph.origin(node(graph, "Add")).note


def test_mul_is_cpu_only():
    """The "2DQ" rule (Add, Mul) is for CPU nodes only and DML has no QLinearMul kernel: on DML the
    group stays DQ -> Mul -> Q, noted with the CPU rule."""
    graph = rewrite(binary_model("Mul"))
    assert sorted(ops(graph)) == [("DequantizeLinear", ""), ("DequantizeLinear", ""), ("Mul", ""), ("QuantizeLinear", "")]
    origin = graph.origin(node(graph, "Mul"))
    assert origin.cpu_rule == "2DQ" and "is for CPU nodes only" in origin.note


def test_mul_fires_on_cpu():
    """For a CPU node the "2DQ" rule makes com.microsoft QLinearMul."""
    graph = rewrite(binary_model("Mul"), provider=CPU)
    assert ops(graph) == [("QLinearMul", MS)]
    assert graph.origin(graph.nodes[0]).rules == ("2DQ",)


def test_gemm_is_cpu_only():
    """The "Gemm" rule (QGemm) is for CPU nodes only: on DML the Gemm stays float, between its DQs
    and Q, and runs as DirectML's float GEMM."""
    model = gemm_model()
    graph = rewrite(model)
    assert unfused(graph, "Gemm") and graph.origin(node(graph, "Gemm")).cpu_rule == "Gemm"
    [entry] = [e for e in plan_model(model, qdq_rules="1.24+").entries if e.node.op_type == "Gemm"]
    assert isinstance(entry, DmlNode) and entry.operator == "DML_OPERATOR_GEMM"


def test_gemm_fires_on_cpu():
    """GemmReplaceWithQuant: com.microsoft QGemm for CPU nodes."""
    graph = rewrite(gemm_model(), provider=CPU)
    assert ops(graph) == [("QGemm", MS)] and list(graph.nodes[0].output) == ["y"]


def test_gemm_without_dq_input_has_no_cpu_rule():
    """GemmNodeGroupSelector needs A and B from DQs; a float A is no QDQ group even on CPU."""
    graph = rewrite(gemm_model(a_from_dq=False))
    assert graph.origin(node(graph, "Gemm")).cpu_rule is None


# --- Unary ops ------------------------------------------------------------------------------------


@pytest.mark.parametrize("rule_set", ALL_RULE_SETS)
@pytest.mark.parametrize("op_type", ["AveragePool", "GlobalAveragePool", "Sigmoid"])
def test_unary_on_dml_since_1_20(op_type, rule_set):
    """The "1DQ" rule -> com.microsoft QLinear<Op> [x, x_s, x_zp, y_s, y_zp]: for DML nodes since
    1.20 (PR #22458); CPU-only in 1.17-1.19."""
    graph = rewrite(unary_model(op_type), rule_set)
    if rule_set == "1.17-1.19":
        assert unfused(graph, op_type) and graph.origin(node(graph, op_type)).cpu_rule == "1DQ"
    else:
        assert ops(graph) == [("QLinear" + op_type, MS)]
        assert list(graph.nodes[0].input) == ["x", "x_dq_scale", "x_dq_zp", "y_scale", "y_zp"]


@pytest.mark.parametrize("op_type", ["Softmax", "LeakyRelu"])
def test_softmax_and_leakyrelu_cpu_only_in_1_24(op_type):
    """PR #26822 (1.24): LeakyRelu and Softmax moved to a CPU-only unary rule, because the DML EP
    has no QLinearLeakyRelu/QLinearSoftmax kernel."""
    graph = rewrite(unary_model(op_type))
    assert unfused(graph, op_type) and graph.origin(node(graph, op_type)).cpu_rule == "1DQ"


@pytest.mark.parametrize("op_type", ["Softmax", "LeakyRelu"])
def test_softmax_and_leakyrelu_fused_on_dml_in_1_20_to_1_23(op_type):
    """1.20-1.23 fused them for DML nodes too, and the real EP then failed at session
    initialization (issue #26882: no DML kernel): planning raises that failure."""
    model = unary_model(op_type)
    graph = rewrite(model, "1.20-1.23")
    assert ops(graph) == [("QLinear" + op_type, MS)]
    with pytest.raises(RealEpError, match=f"makes QLinear{op_type} for a DML node, and the DML EP has no kernel for it"):
        plan_model(model, qdq_rules="1.20-1.23")


def test_qlinear_softmax_carries_the_softmax_opset():
    """UnaryReplaceWithQLinear adds ``opset`` = Softmax's since-version for Softmax
    (qdq_actions.cc: ExtraAttributes), a required attribute of com.microsoft QLinearSoftmax; the
    node keeps Softmax's own attributes too."""
    graph = rewrite(unary_model("Softmax"), provider=CPU)
    attributes = {a.name: helper.get_attribute_value(a) for a in node(graph, "QLinearSoftmax").attribute}
    assert attributes.get("opset") == 13


def test_unary_type_mismatch_rejected():
    """UnaryNodeGroupSelector: the DQ's input type must equal the Q's output type."""
    graph = rewrite(unary_model("Sigmoid", q_type=S8))
    assert unfused(graph, "Sigmoid")
    assert "differs from output type" in graph.origin(node(graph, "Sigmoid")).note


# --- Concat ---------------------------------------------------------------------------------------


def test_concat_fires_into_qlinearconcat():
    """VariadicReplaceWithQLinear: com.microsoft QLinearConcat [y_s, y_zp, (x_i, s_i, zp_i)...]."""
    graph = rewrite(concat_model())
    assert ops(graph) == [("QLinearConcat", MS)]
    [qconcat] = graph.nodes
    assert list(qconcat.input) == ["y_scale", "y_zp", "x1", "x1_dq_scale", "x1_dq_zp", "x2", "x2_dq_scale", "x2_dq_zp"]
    assert list(qconcat.output) == ["y"]
    assert [(a.name, a.i) for a in qconcat.attribute] == [("axis", 1)]


def test_concat_input_not_from_dq_rejected():
    """CheckQDQNodes: every existing input of Concat must come from a DQ."""
    graph = rewrite(concat_model(second_from_dq=False))
    assert unfused(graph, "Concat")
    assert "1 of its inputs come from DequantizeLinear, 2 must" in graph.origin(node(graph, "Concat")).note


# --- Numbers: fused groups against onnxruntime ----------------------------------------------------


def numbers_cases():
    rng = np.random.default_rng(1)
    weight = rng.integers(-8, 8, (3, 2, 3, 3)).astype(S8)
    feeds = {"x": rng.integers(0, 32, (1, 2, 5, 5)).astype(U8)}
    yield pytest.param(conv_model(weight=weight), feeds, "QLinearConv", id="conv")
    feeds = {"a": rng.integers(0, 32, (2, 3, 4)).astype(U8)}
    yield pytest.param(matmul_model(b_values=rng.integers(-8, 8, (4, 5))), feeds, "QLinearMatMul", id="matmul")
    feeds = {name: rng.integers(0, 32, (2, 3, 4)).astype(U8) for name in ("a", "b")}
    yield pytest.param(binary_model("Add"), feeds, "QLinearAdd", id="add")


@pytest.mark.host_sensitive
@pytest.mark.parametrize("model, feeds, op_type", list(numbers_cases()))
def test_fused_group_matches_onnxruntime(model, feeds, op_type):
    """The QLinear node the rule makes runs on DirectML (in dml_ep) and, with arithmetic="onnxruntime",
    gives onnxruntime's CPU outputs bit for bit (onnxruntime fuses the same group on its CPU EP)."""
    session = dml_ep.InferenceSession(model, arithmetic="onnxruntime")
    [entry] = session.plan.entries
    assert isinstance(entry, DmlNode) and entry.node.op_type == op_type
    actual = session.run(None, feeds)[0]
    expected = cpu_session(model, "ort-exact").run(None, feeds)[0]
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert len(np.unique(expected)) > 5  # not all saturated or constant
    np.testing.assert_array_equal(actual, expected)
