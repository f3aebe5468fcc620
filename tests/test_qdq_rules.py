"""onnxruntime's QDQ rewrites as dml_ep emulates them (``dml_ep.passes``), one rule condition at a time.

Every rule condition gets a case where it fires and one where it rejects, on small graphs built
here (opset 17, ir_version 8, uint8 activations, int8 weights), for nodes on the DML EP unless a
test says otherwise. Where onnxruntime can show what it does (its CPU EP), the rewrite is checked
against the optimized graph onnxruntime writes, and fused groups are run through dml_ep and
onnxruntime for bit-exact outputs. The expectations are onnxruntime's source
(qdq_selector_action_transformer.cc, qdq_selectors.cc, qdq_actions.cc, ensure_unique_dq_for_node_unit.cc,
relu_quantizelinear.cc, clip_quantizelinear.cc, qdq_final_cleanup.cc, the DML EP's GraphTransformer.cpp).
"""

from __future__ import annotations

import collections

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

import dml_ep
from dml_ep.errors import RealEpError
from dml_ep.passes import CPU, DML, EditableGraph, qdq_transformer
from dml_ep.passes.qdq_selectors import conv as conv_selector
from dml_ep.passes.qdq_selectors import qdq_group
from dml_ep.plan import DmlNode, FallbackNode
from dml_ep.planner import plan_model
from dml_ep.reference import cpu_session

U8, S8, U16, I32, F32 = np.uint8, np.int8, np.uint16, np.int32, np.float32
MS = "com.microsoft"
ALL_RULE_SETS = ("1.24+", "1.20-1.23", "1.17-1.19")


# --- building graphs ------------------------------------------------------------------------------


class Graph:
    """A few nodes with Q/DQ helpers; constants become initializers named after the node using them."""

    def __init__(self):
        self.nodes, self.initializers, self.inputs, self.outputs = [], [], [], []

    def input(self, name, dtype, shape):
        self.inputs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), shape))
        return name

    def output(self, name, dtype, shape=None):
        self.outputs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), shape))
        return name

    def const(self, name, value):
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op_type, inputs, output, name=None, domain="", **attributes):
        self.nodes.append(helper.make_node(op_type, inputs, [output], name=name or output, domain=domain, **attributes))
        return output

    def dq(self, x, scale, zero_point, out, domain="", **attributes):
        """DequantizeLinear named ``out``; ``zero_point`` None leaves the input out."""
        inputs = [x, self.const(f"{out}_scale", np.asarray(scale, F32))]
        if zero_point is not None:
            inputs.append(self.const(f"{out}_zp", zero_point))
        return self.node("DequantizeLinear", inputs, out, domain=domain, **attributes)

    def q(self, x, scale, zero_point, out, domain=""):
        inputs = [x, self.const(f"{out}_scale", np.asarray(scale, F32))]
        if zero_point is not None:
            inputs.append(self.const(f"{out}_zp", zero_point))
        return self.node("QuantizeLinear", inputs, out, domain=domain)

    def model(self, opset=17):
        graph = helper.make_graph(self.nodes, "qdq_rules", self.inputs, self.outputs, self.initializers)
        opsets = [helper.make_opsetid("", opset)]
        if any(n.domain == MS for n in self.nodes):
            opsets.append(helper.make_opsetid(MS, 1))
        model = helper.make_model(graph, opset_imports=opsets, ir_version=8)
        model = onnx.shape_inference.infer_shapes(model)  # the outputs declared without a shape get one
        onnx.checker.check_model(model)
        return model


def zp(dtype, value=0):
    return np.array(value, dtype)


X_SCALE, W_SCALES, Y_SCALE = 0.02, np.array([0.01, 0.02, 0.03], F32), 0.05
CONV_WEIGHT = (np.arange(54).reshape(3, 2, 3, 3) % 7 - 3).astype(S8)


def conv_model(x_type=U8, w_type=S8, bias="int32", domain="", conv_is_output=False, other_consumer=False,
               dq_is_output=False, activation=None, q_scale=Y_SCALE, q_zp=None, weight=CONV_WEIGHT):
    """DQ(x) + DQ(w, per-channel axis 0) + DQ(int32 bias) -> Conv -> [activation ->] Q -> y.

    ``bias``: "int32" (a DQ of int32), "int8" (a DQ of int8), "float" (a float initializer), None.
    ``activation``: None, "Relu" or ("Clip", low, high). ``q_zp`` defaults to the middle of the type.
    """
    g = Graph()
    g.input("x", x_type, [1, 2, 5, 5])
    g.dq("x", X_SCALE, zp(x_type, 3), "x_dq", domain)
    g.dq(g.const("w", weight.astype(w_type)), W_SCALES, np.zeros(3, w_type), "w_dq", domain, axis=0)
    inputs = ["x_dq", "w_dq"]
    if bias == "float":
        inputs.append(g.const("bias", np.array([0.0123, -0.5, 1.37], F32)))
    elif bias is not None:
        values = np.array([5, -7, 11], I32 if bias == "int32" else S8)
        inputs.append(g.dq(g.const("bias", values), np.float32(X_SCALE) * W_SCALES, None, "b_dq", domain, axis=0))
    out = g.node("Conv", inputs, "conv_out", name="conv", pads=[1, 1, 1, 1])
    if activation == "Relu":
        out = g.node("Relu", [out], "act_out", name="relu")
    elif activation is not None:
        _, low, high = activation
        out = g.node("Clip", [out, g.const("clip_min", F32(low)), g.const("clip_max", F32(high))], "act_out", name="clip")
    middle = (int(np.iinfo(x_type).min) + int(np.iinfo(x_type).max) + 1) // 2
    g.q(out, q_scale, zp(x_type, middle if q_zp is None else q_zp), "y", domain)
    g.output("y", x_type, [1, 3, 5, 5])
    if conv_is_output:
        g.output("conv_out", F32)
    if other_consumer:
        g.output(g.node("Sigmoid", ["conv_out"], "other", name="other"), F32)
    if dq_is_output:
        g.output("x_dq", F32)
    return g.model()


def matmul_model(tail="q", b_values=None):
    """DQ(a u8) + DQ(b s8 constant) -> MatMul -> tail: "q" (Q -> y), "none" (float output),
    "q+other" (Q -> y and a Sigmoid reading the MatMul's output)."""
    g = Graph()
    g.input("a", U8, [2, 3, 4])
    g.dq("a", 0.02, zp(U8, 3), "a_dq")
    b = np.arange(20).reshape(4, 5) % 9 - 4 if b_values is None else b_values
    g.dq(g.const("b", b.astype(S8)), 0.01, zp(S8), "b_dq")
    g.node("MatMul", ["a_dq", "b_dq"], "mm_out", name="matmul")
    if tail == "none":
        g.output("mm_out", F32)
    else:
        g.output(g.q("mm_out", 0.01, zp(U8, 128), "y"), U8)
    if tail == "q+other":
        g.output(g.node("Sigmoid", ["mm_out"], "other", name="other"), F32)
    return g.model()


def binary_model(op_type="Add", a_type=U8, b_type=U8):
    """DQ(a) + DQ(b) -> Add/Mul -> Q(u8) -> y, both operands fed."""
    g = Graph()
    for name, dtype, scale in (("a", a_type, 0.02), ("b", b_type, 0.03)):
        g.input(name, dtype, [2, 3, 4])
        g.dq(name, scale, zp(dtype, 5), f"{name}_dq")
    g.node(op_type, ["a_dq", "b_dq"], "op_out", name=op_type.lower())
    g.output(g.q("op_out", 0.04, zp(U8, 100), "y"), U8)
    return g.model()


def gemm_model(a_from_dq=True):
    """DQ(a u8) + DQ(b s8) -> Gemm -> Q -> y; or a float ``a`` fed directly."""
    g = Graph()
    if a_from_dq:
        g.input("a", U8, [2, 4])
        g.dq("a", 0.02, zp(U8, 3), "a_dq")
    else:
        g.input("a_dq", F32, [2, 4])
    g.dq(g.const("b", (np.arange(12).reshape(4, 3) % 5 - 2).astype(S8)), 0.01, zp(S8), "b_dq")
    g.node("Gemm", ["a_dq", "b_dq"], "gemm_out", name="gemm")
    g.output(g.q("gemm_out", 0.01, zp(U8, 128), "y"), U8)
    return g.model()


UNARY_ATTRIBUTES = {"AveragePool": {"kernel_shape": [2, 2]}, "LeakyRelu": {"alpha": 0.1}}


def unary_model(op_type, q_type=U8):
    """DQ(x u8) -> op -> Q -> y."""
    g = Graph()
    g.input("x", U8, [1, 2, 4, 4])
    g.dq("x", 0.02, zp(U8, 3), "x_dq")
    g.node(op_type, ["x_dq"], "op_out", name=op_type.lower(), **UNARY_ATTRIBUTES.get(op_type, {}))
    scale, zero_point = (1 / 256, 0) if op_type in ("Softmax", "Sigmoid") else (0.02, 3)
    g.output(g.q("op_out", scale, zp(q_type, zero_point), "y"), q_type)
    return g.model()


def drop_model(op_type, dtype=U8, dq_scale=0.05, q_scale=0.05, domain="", opset=17):
    """DQ(x) -> Reshape/MaxPool/Resize -> Q -> y, the Q/DQ parameters constant scalars."""
    g = Graph()
    g.input("x", dtype, [1, 2, 4, 4])
    g.dq("x", dq_scale, zp(dtype, 7), "x_dq", domain)
    if op_type == "Reshape":
        g.node("Reshape", ["x_dq", g.const("shape", np.array([2, 16], np.int64))], "op_out", name="reshape")
    elif op_type == "MaxPool":
        g.node("MaxPool", ["x_dq"], "op_out", name="maxpool", kernel_shape=[2, 2])
    else:
        g.node("Resize", ["x_dq", "", g.const("scales", np.array([1, 1, 2, 2], F32))], "op_out", name="resize", mode="nearest")
    shape = {"Reshape": [2, 16], "MaxPool": [1, 2, 3, 3], "Resize": [1, 2, 8, 8]}[op_type]
    g.output(g.q("op_out", q_scale, zp(dtype, 7), "y", domain), dtype, shape)
    return g.model(opset)


def argmax_model(zero_point=True):
    """DQ(x u8) -> ArgMax -> int64 graph output."""
    g = Graph()
    g.input("x", U8, [1, 2, 4, 4])
    g.dq("x", 0.02, zp(U8, 3) if zero_point else None, "x_dq")
    g.output(g.node("ArgMax", ["x_dq"], "index", name="argmax", axis=1), np.int64)
    return g.model()


def concat_model(second_from_dq=True):
    """DQ(x1) + DQ(x2) -> Concat -> Q -> y; or x2 a float input read directly."""
    g = Graph()
    g.input("x1", U8, [1, 2, 3])
    g.dq("x1", 0.02, zp(U8, 3), "x1_dq")
    if second_from_dq:
        g.input("x2", U8, [1, 2, 3])
        g.dq("x2", 0.03, zp(U8, 5), "x2_dq")
    else:
        g.input("x2_dq", F32, [1, 2, 3])
    g.node("Concat", ["x1_dq", "x2_dq"], "concat_out", name="concat", axis=1)
    g.output(g.q("concat_out", 0.04, zp(U8, 7), "y"), U8)
    return g.model()


# --- running the passes -------------------------------------------------------------------------


def rewrite(model, rule_set="1.24+", provider=DML, int8_allowed=False) -> EditableGraph:
    graph = EditableGraph(model)
    qdq_transformer(graph, rule_set, provider=provider, int8_allowed=int8_allowed)
    return graph


def ops(graph) -> list[tuple[str, str]]:
    return [(n.op_type, n.domain) for n in graph.nodes]


def node(graph, op_type) -> onnx.NodeProto:
    [found] = [n for n in graph.nodes if n.op_type == op_type]
    return found


def names(nodes) -> list[str]:
    return sorted(n.name for n in nodes)


QDQ = [("DequantizeLinear", ""), ("QuantizeLinear", "")]


def unfused(graph, op_type) -> bool:
    """The target is still there, between its DQs and Q."""
    kinds = {op for op, _ in ops(graph)}
    return op_type in kinds and {"DequantizeLinear", "QuantizeLinear"} <= kinds


# --- 1. Conv ------------------------------------------------------------------------------------


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


def test_dq_graph_output_rejected_by_selector_but_duplicated_by_ensure_unique_dq():
    """NodeGroup::CanCreateNodeGroup refuses a DQ that produces a graph output; but
    EnsureUniqueDQForNodeUnit runs first and gives every consumer of such a DQ its own copy, so
    onnxruntime fuses the Conv and keeps the original DQ for the graph output."""
    model = conv_model(dq_is_output=True)
    graph = EditableGraph(model)
    reason = conv_selector(graph, next(n for n in graph.nodes if n.op_type == "Conv"))
    assert isinstance(reason, str) and "graph output" in reason
    graph = rewrite(model)
    assert sorted(ops(graph)) == [("DequantizeLinear", ""), ("QLinearConv", "")]
    assert node(graph, "DequantizeLinear").output[0] == "x_dq"
    assert node(graph, "QLinearConv").input[0] == "x"
    assert graph.origin(node(graph, "QLinearConv")).rules == ("EnsureUniqueDQForNodeUnit", "Conv")


# --- 2. A DQ with two consumers -----------------------------------------------------------------


def shared_dq_model():
    """One DQ(x) read by two Convs, each with its own weight DQ and Q."""
    g = Graph()
    g.input("x", U8, [1, 2, 5, 5])
    g.dq("x", X_SCALE, zp(U8, 3), "x_dq")
    for i in (1, 2):
        g.dq(g.const(f"w{i}", CONV_WEIGHT), W_SCALES, np.zeros(3, S8), f"w{i}_dq", axis=0)
        g.node("Conv", ["x_dq", f"w{i}_dq"], f"conv{i}_out", name=f"conv{i}", pads=[1, 1, 1, 1])
        g.output(g.q(f"conv{i}_out", Y_SCALE, zp(U8, 128), f"y{i}"), U8)
    return g.model()


def test_shared_dq_rejected_by_the_selector_alone():
    """CanCreateNodeGroup: each DQ must have one output edge, to the target."""
    graph = EditableGraph(shared_dq_model())
    for target in [n for n in graph.nodes if n.op_type == "Conv"]:
        assert "other consumers" in conv_selector(graph, target)
        assert "other consumers" in qdq_group(graph, target)


def test_shared_dq_duplicated_then_both_convs_fuse():
    """EnsureUniqueDQForNodeUnit copies the DQ for the second consumer (``<name>/duplicated``),
    after which both Conv groups qualify and become QLinearConvs reading the same ``x``."""
    graph = rewrite(shared_dq_model())
    assert ops(graph) == [("QLinearConv", "")] * 2
    assert [(n.name, n.input[0], n.output[0]) for n in graph.nodes] == [("conv1", "x", "y1"), ("conv2", "x", "y2")]
    rules = sorted(graph.origin(n).rules for n in graph.nodes)
    assert rules == [("Conv",), ("EnsureUniqueDQForNodeUnit", "Conv")]


# --- 3. WeightBiasQuantization ------------------------------------------------------------------


def test_float_bias_quantized_then_conv_fuses():
    """WeightBiasQuantization (1.20+): a float Conv bias becomes DQ(int32 rint(bias / (x_s * w_s)),
    x_s * w_s) in float32 when X comes from a DQ and the output reaches a Q; the Conv rule then fuses
    it with that int32 bias."""
    graph = rewrite(conv_model(bias="float"))
    assert ops(graph) == [("QLinearConv", "")]
    qconv = graph.nodes[0]
    bias = graph.constants[qconv.input[8]]
    expected = np.rint(np.array([0.0123, -0.5, 1.37], F32) / (np.float32(X_SCALE) * W_SCALES)).astype(I32)
    assert bias.dtype == I32
    np.testing.assert_array_equal(bias, expected)
    assert graph.origin(qconv).rules == ("WeightBiasQuantization", "Conv")


def test_float_bias_not_quantized_before_1_20():
    """1.17-1.19 have no WeightBiasQuantization: the float bias is not from a DQ, so CheckQDQNodes
    (every existing input from a DQ) rejects the Conv."""
    graph = rewrite(conv_model(bias="float"), "1.17-1.19")
    assert unfused(graph, "Conv")
    assert "2 of its inputs come from DequantizeLinear, 3 must" in graph.origin(node(graph, "Conv")).note


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


def test_float_bias_not_quantized_without_a_q():
    """WeightBiasQuantization needs a no-branch path from the node to a QuantizeLinear; a Conv
    whose output also feeds another node keeps its float bias (and stays unfused)."""
    graph = rewrite(conv_model(bias="float", other_consumer=True))
    assert unfused(graph, "Conv")
    assert "bias" in node(graph, "Conv").input[2] and not graph.added_constants


# --- 4. Relu / Clip before a Q ------------------------------------------------------------------


def test_redundant_relu_removed_on_cpu():
    """ReluQuantFusion (L2, CPU nodes only since 1.19): a Relu before a Q whose zero point is the
    type's minimum (uint8 0) clamps nothing the Q does not, so it goes and the Conv group fuses."""
    graph = rewrite(conv_model(activation="Relu", q_zp=0), provider=CPU)
    assert ops(graph) == [("QLinearConv", "")]
    assert graph.origin(graph.nodes[0]).rules == ("ReluQuantFusion", "Conv")
    assert "relu" in names(graph.origin(graph.nodes[0]).nodes)


def test_redundant_relu_kept_on_dml_1_24():
    """Since 1.19 ReluQuantFusion is CPU-only; for a DML node the newest source's GetQDQSelection takes the
    Relu as a redundant clip but IsReplacementConvex fails for DQ -> Conv -> Relu -> Q, so the
    Conv stays unfused."""
    graph = rewrite(conv_model(activation="Relu", q_zp=0))
    assert unfused(graph, "Conv") and ("Relu", "") in ops(graph)


@pytest.mark.parametrize("activation", ["Relu", ("Clip", 0, 6)], ids=["relu", "clip"])
def test_redundant_activation_kept_on_dml_1_24_is_explained(activation):
    """The Conv's note should say what keeps it unfused on DML: the redundant Relu/Clip before its Q,
    which onnxruntime removes (ReluQuantFusion/ClipQuantFusion) for CPU nodes only."""
    graph = rewrite(conv_model(activation=activation, q_scale=0.02, q_zp=0))
    assert unfused(graph, "Conv")
    note = graph.origin(node(graph, "Conv")).note
    assert note and ("Relu" if activation == "Relu" else "Clip") in note, note


def test_redundant_relu_removed_on_dml_1_17():
    """Up to 1.18 (dml_ep's "1.17-1.19") ReluQuantFusion was an L1 rule for every EP."""
    graph = rewrite(conv_model(activation="Relu", q_zp=0), "1.17-1.19")
    assert ops(graph) == [("QLinearConv", "")]


@pytest.mark.parametrize("provider, rule_set", [(CPU, "1.24+"), (DML, "1.24+"), (DML, "1.20-1.23"), (DML, "1.17-1.19")])
def test_relu_with_nonzero_zero_point_kept(provider, rule_set):
    """ReluQuantFusion: zero point 10 means the Q can represent negatives the Relu clamps, so the
    Relu is not redundant on any provider, and the Conv (whose consumer is the Relu) stays unfused."""
    graph = rewrite(conv_model(activation="Relu", q_zp=10), rule_set, provider)
    assert ("Relu", "") in ops(graph) and unfused(graph, "Conv")


@pytest.mark.parametrize("provider, rule_set", [(CPU, "1.24+"), (DML, "1.17-1.19")])
@pytest.mark.parametrize("q_scale, redundant", [(0.02, True), (0.05, False)], ids=["q-range-0..5.1", "q-range-0..12.75"])
def test_clip_removed_when_q_range_is_narrower(provider, rule_set, q_scale, redundant):
    """ClipQuantFusion: Clip(0, 6) goes when the Q's range [s*(0-zp), s*(255-zp)] lies inside
    [0, 6] (scale 0.02: [0, 5.1]); with scale 0.05 ([0, 12.75]) the Clip clamps values the Q keeps."""
    graph = rewrite(conv_model(activation=("Clip", 0, 6), q_scale=q_scale, q_zp=0), rule_set, provider)
    if redundant:
        assert ops(graph) == [("QLinearConv", "")]
        assert graph.origin(graph.nodes[0]).rules == ("ClipQuantFusion", "Conv")
    else:
        assert ("Clip", "") in ops(graph) and unfused(graph, "Conv")


def test_redundant_clip_kept_on_dml_1_24():
    """ClipQuantFusion is CPU-only since 1.19: on DML the redundant Clip stays, and the Conv with it."""
    graph = rewrite(conv_model(activation=("Clip", 0, 6), q_scale=0.02, q_zp=0))
    assert ("Clip", "") in ops(graph) and unfused(graph, "Conv")


# --- 5. MatMul ----------------------------------------------------------------------------------


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


# --- 6. Add, Mul, Gemm --------------------------------------------------------------------------


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
    """The "Gemm" rule (QGemm) is for CPU nodes only: on DML the Gemm stays float, and the plan's
    fallback for it says why."""
    model = gemm_model()
    graph = rewrite(model)
    assert unfused(graph, "Gemm") and graph.origin(node(graph, "Gemm")).cpu_rule == "Gemm"
    [entry] = [e for e in plan_model(model, qdq_rules="1.24+").entries if e.node.op_type == "Gemm"]
    assert isinstance(entry, FallbackNode) and "CPU nodes only" in entry.reason


def test_gemm_fires_on_cpu():
    """GemmReplaceWithQuant: com.microsoft QGemm for CPU nodes."""
    graph = rewrite(gemm_model(), provider=CPU)
    assert ops(graph) == [("QGemm", MS)] and list(graph.nodes[0].output) == ["y"]


def test_gemm_without_dq_input_has_no_cpu_rule():
    """GemmNodeGroupSelector needs A and B from DQs; a float A is no QDQ group even on CPU."""
    graph = rewrite(gemm_model(a_from_dq=False))
    assert graph.origin(node(graph, "Gemm")).cpu_rule is None


# --- 7. Unary ops -------------------------------------------------------------------------------


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


# --- 8. Drops -----------------------------------------------------------------------------------


@pytest.mark.parametrize("rule_set", ALL_RULE_SETS)
def test_reshape_drop_fires(rule_set):
    """DropQDQNodesSelector + MergeIntoTargetFixed (every release since 1.17): equal constant scalar
    Q/DQ parameters, so the Reshape itself reads the quantized tensor and writes the Q's output name."""
    graph = rewrite(drop_model("Reshape"), rule_set)
    assert ops(graph) == [("Reshape", "")]
    [reshape] = graph.nodes
    assert list(reshape.input) == ["x", "shape"] and list(reshape.output) == ["y"] and reshape.name == "reshape"
    assert graph.origin(reshape).rules == ("drop",)


@pytest.mark.parametrize("op_type", ["Reshape", "MaxPool"])
def test_drop_with_different_scales_rejected(op_type):
    """IsQDQPairSupported: the Q and DQ scales (and zero points) must be equal."""
    graph = rewrite(drop_model(op_type, dq_scale=0.05, q_scale=0.06))
    assert unfused(graph, op_type)
    assert "not the same constant scalars" in graph.origin(node(graph, op_type)).note


@pytest.mark.parametrize("op_type, fires", [("Reshape", True), ("MaxPool", False)])
def test_drop_uint16(op_type, fires):
    """The 'drop' rule allows 16-bit types; 'drop_no_int16_support_and_positive_scale' (MaxPool) does not."""
    graph = rewrite(drop_model(op_type, dtype=U16, domain=MS))
    if fires:
        assert ops(graph) == [(op_type, "")]
    else:
        assert unfused(graph, op_type) and "16-bit" in graph.origin(node(graph, op_type)).note


def test_maxpool_12_drop_fires():
    """'drop_no_int16_support_and_positive_scale' covers MaxPool since-version 12 (opset 12+ models)."""
    graph = rewrite(drop_model("MaxPool"))
    assert ops(graph) == [("MaxPool", "")]
    assert list(graph.nodes[0].input) == ["x"] and list(graph.nodes[0].output) == ["y"]


def test_maxpool_11_not_covered():
    """The rule lists MaxPool {12}: an opset-11 model's MaxPool (since-version 11) is not dropped."""
    graph = rewrite(drop_model("MaxPool", opset=11))
    assert unfused(graph, "MaxPool") and graph.origin(node(graph, "MaxPool")).note is None


@pytest.mark.parametrize("scale", [0.0, -0.05])
@pytest.mark.parametrize("op_type, rule_set, fires", [
    ("MaxPool", "1.24+", False),       # allow_nonpositive_scale=false
    ("MaxPool", "1.17-1.19", True),    # the old drop_no_int16_support had no scale check
    ("Reshape", "1.24+", True),        # 'drop': allow_nonpositive_scale=true
])
def test_nonpositive_scale(op_type, rule_set, fires, scale):
    """Since 1.20, MaxPool/ReduceMax/ReduceMin need a positive constant Q scale (max does not
    commute with a negative scale); the plain 'drop' rule takes any scale."""
    graph = rewrite(drop_model(op_type, dq_scale=scale, q_scale=scale), rule_set)
    if fires:
        assert ops(graph) == [(op_type, "")]
    else:
        assert unfused(graph, op_type) and "positive" in graph.origin(node(graph, op_type)).note


@pytest.mark.parametrize("rule_set", ALL_RULE_SETS)
def test_resize_drop_on_dml_only_in_1_17_to_1_19(rule_set):
    """PR #22458 (1.20+) made Resize's drop CPU-only ("We don't drop the resample QDQ ops here for DML")."""
    graph = rewrite(drop_model("Resize"), rule_set)
    if rule_set == "1.17-1.19":
        assert ops(graph) == [("Resize", "")]
    else:
        assert unfused(graph, "Resize") and graph.origin(node(graph, "Resize")).cpu_rule == "drop_no_int16_support"


def test_resize_drop_fires_on_cpu():
    """'drop_no_int16_support' still drops Resize's Q/DQ for CPU nodes."""
    graph = rewrite(drop_model("Resize"), provider=CPU)
    assert ops(graph) == [("Resize", "")]


@pytest.mark.parametrize("zero_point", [True, False])
def test_argmax_drops_its_dq(zero_point):
    """DropDQNodeGroupSelector (IsDQSupported): the DQ's scale and zero point must be constant
    scalars, and the zero point must exist; ArgMax then reads the quantized tensor directly."""
    graph = rewrite(argmax_model(zero_point))
    if zero_point:
        assert ops(graph) == [("ArgMax", "")] and list(graph.nodes[0].input) == ["x"]
        assert graph.origin(graph.nodes[0]).rules == ("dropDQ",)
    else:
        assert ops(graph) == [("DequantizeLinear", ""), ("ArgMax", "")]


# --- 9. Concat ----------------------------------------------------------------------------------


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


# --- 10. QDQFinalCleanupTransformer --------------------------------------------------------------


def cleanup_model(q_scale=0.05, q_is_output=False, q_other_reader=False):
    """x (u8) -> DQ -> Q -> t -> DQ -> Relu -> out: a DQ -> Q pair in the middle of the graph."""
    g = Graph()
    g.input("x", U8, [2, 3])
    g.dq("x", 0.05, zp(U8, 7), "x_dq")
    g.q("x_dq", q_scale, zp(U8, 7), "t")
    if q_is_output:
        g.output("t", U8)
    if q_other_reader or not q_is_output:
        g.dq("t", 0.05, zp(U8, 7), "t_dq")
        g.output(g.node("Relu", ["t_dq"], "out", name="relu"), F32)
    return g.model()


def test_final_cleanup_removes_dq_q_pair():
    """QDQFinalCleanupTransformer (always, for every EP): DQ -> Q with the same constant scalar
    parameters is an identity; readers of the Q's output read the DQ's input instead."""
    graph = rewrite(cleanup_model())
    assert ops(graph) == [("DequantizeLinear", ""), ("Relu", "")]
    assert graph.nodes[0].name == "t_dq" and graph.nodes[0].input[0] == "x"


def test_final_cleanup_keeps_pair_with_different_parameters():
    """IsQDQPairSupported fails for different scales: the DQ -> Q pair requantizes, and stays."""
    graph = rewrite(cleanup_model(q_scale=0.06))
    assert ops(graph) == [*QDQ, ("DequantizeLinear", ""), ("Relu", "")]


def test_final_cleanup_graph_output_of_a_graph_input_becomes_identity():
    """When the Q makes a graph output and the DQ reads a graph input, an Identity writes it."""
    graph = rewrite(cleanup_model(q_is_output=True))
    assert ops(graph) == [("Identity", "")]
    assert list(graph.nodes[0].input) == ["x"] and list(graph.nodes[0].output) == ["t"]


def test_final_cleanup_keeps_graph_output_q_with_readers():
    """A Q that makes a graph output and also has readers is left alone."""
    graph = rewrite(cleanup_model(q_is_output=True, q_other_reader=True))
    assert ops(graph) == [*QDQ, ("DequantizeLinear", ""), ("Relu", "")]


# --- 11. The DML EP's activation fusion ----------------------------------------------------------


def add_relu_model(add_is_output=False):
    g = Graph()
    g.input("a", F32, [2, 3])
    g.input("b", F32, [2, 3])
    g.node("Add", ["a", "b"], "sum", name="add")
    g.output(g.node("Relu", ["sum"], "out", name="relu"), F32)
    if add_is_output:
        g.output("sum", F32)
    return g.model()


def test_dml_fuses_relu_into_add():
    """GraphTransformer.cpp PerformOperatorFusion: Add with one consumer, a Relu, becomes
    com.microsoft.dml DmlFusedAdd: ELEMENT_WISE_ADD1 with a fused RELU."""
    plan = plan_model(add_relu_model())
    [entry] = plan.entries
    assert isinstance(entry, DmlNode)
    assert (entry.node.op_type, entry.node.domain) == ("DmlFusedAdd", "com.microsoft.dml")
    assert entry.desc.OPERATOR_TYPE.name == "ELEMENT_WISE_ADD1"
    assert entry.desc.FusedActivation.OPERATOR_TYPE.name == "ACTIVATION_RELU"
    assert entry.origin.rule == "DmlOperatorFusion" and names(entry.origin.nodes) == ["add", "relu"]


def test_dml_does_not_fuse_an_add_that_is_a_graph_output():
    """The fusion needs the Add's output to have one edge and not be a graph output."""
    plan = plan_model(add_relu_model(add_is_output=True))
    assert [e.node.op_type for e in plan.entries] == ["Add", "Relu"]
    assert plan.entries[0].desc.FusedActivation is None


# --- 12. Numbers: fused groups against onnxruntime -------------------------------------------------


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


# --- 13. The CPU provider against onnxruntime's own optimized graph -------------------------------


def onnxruntime_ops(model, tmp_path) -> collections.Counter:
    """The op types in the graph onnxruntime's CPU EP optimizes at ORT_ENABLE_EXTENDED."""
    path = str(tmp_path / "optimized.onnx")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = path
    options.log_severity_level = 3
    # ConvActivationFusion (CPU EP: float Conv + Relu -> FusedConv) is no QDQ rewrite; left out so
    # that an unfused group compares as the float ops it keeps.
    ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"],
                         disabled_optimizers=["ConvActivationFusion"])
    return collections.Counter((n.op_type, n.domain) for n in onnx.load(path).graph.node if n.op_type != "Identity")


CPU_CASES = {
    # the cases the rules fuse
    "conv": lambda: conv_model(),
    "conv-no-bias": lambda: conv_model(bias=None),
    "conv-float-bias": lambda: conv_model(bias="float"),
    "conv-dq-graph-output": lambda: conv_model(dq_is_output=True),
    "shared-dq": shared_dq_model,
    "matmul": lambda: matmul_model(),
    "matmul-no-q": lambda: matmul_model(tail="none"),
    "mul": lambda: binary_model("Mul"),
    "add": lambda: binary_model("Add"),
    "gemm": gemm_model,
    "concat": lambda: concat_model(),
    "reshape-drop": lambda: drop_model("Reshape"),
    "reshape-drop-uint16": lambda: drop_model("Reshape", dtype=U16, domain=MS),
    "reshape-drop-negative-scale": lambda: drop_model("Reshape", dq_scale=-0.05, q_scale=-0.05),
    "maxpool-drop": lambda: drop_model("MaxPool"),
    "resize-drop": lambda: drop_model("Resize"),
    "argmax-drop-dq": lambda: argmax_model(),
    "relu-removal": lambda: conv_model(activation="Relu", q_zp=0),
    "clip-removal": lambda: conv_model(activation=("Clip", 0, 6), q_scale=0.02, q_zp=0),
    "averagepool": lambda: unary_model("AveragePool"),
    "sigmoid": lambda: unary_model("Sigmoid"),
    "softmax": lambda: unary_model("Softmax"),
    "leakyrelu": lambda: unary_model("LeakyRelu"),
    "final-cleanup": lambda: cleanup_model(),
    "final-cleanup-identity": lambda: cleanup_model(q_is_output=True),
    # the cases a condition rejects
    "conv-int8": lambda: conv_model(x_type=S8),
    "conv-uint16": lambda: conv_model(x_type=U16, domain=MS),
    "conv-int8-bias": lambda: conv_model(bias="int8"),
    "conv-graph-output": lambda: conv_model(conv_is_output=True),
    "conv-other-consumer": lambda: conv_model(other_consumer=True),
    "float-bias-no-q-path": lambda: conv_model(bias="float", other_consumer=True),
    "matmul-q-and-other": lambda: matmul_model(tail="q+other"),
    "add-mixed-types": lambda: binary_model("Add", b_type=S8),
    "gemm-a-not-from-dq": lambda: gemm_model(a_from_dq=False),
    "sigmoid-type-mismatch": lambda: unary_model("Sigmoid", q_type=S8),
    "reshape-different-scales": lambda: drop_model("Reshape", q_scale=0.06),
    "maxpool-uint16": lambda: drop_model("MaxPool", dtype=U16, domain=MS),
    "maxpool-negative-scale": lambda: drop_model("MaxPool", dq_scale=-0.05, q_scale=-0.05),
    "maxpool-zero-scale": lambda: drop_model("MaxPool", dq_scale=0.0, q_scale=0.0),
    "maxpool-opset-11": lambda: drop_model("MaxPool", opset=11),
    "argmax-no-zero-point": lambda: argmax_model(zero_point=False),
    "concat-input-not-from-dq": lambda: concat_model(second_from_dq=False),
    "relu-kept": lambda: conv_model(activation="Relu", q_zp=10),
    "clip-kept": lambda: conv_model(activation=("Clip", 0, 6), q_scale=0.05, q_zp=0),
    "final-cleanup-different-scales": lambda: cleanup_model(q_scale=0.06),
    "final-cleanup-output-with-readers": lambda: cleanup_model(q_is_output=True, q_other_reader=True),
}


@pytest.mark.parametrize("case", CPU_CASES)
def test_cpu_rewrite_matches_onnxruntime(case, tmp_path):
    """For CPU nodes, qdq_transformer(provider=CPU) leaves the op types onnxruntime's own
    optimizer leaves (ORT_ENABLE_EXTENDED: level 1 and 2, where the QDQ transformers run)."""
    model = CPU_CASES[case]()
    ours = collections.Counter(op for op in ops(rewrite(model, provider=CPU)) if op[0] != "Identity")
    assert ours == onnxruntime_ops(model, tmp_path)


def _float_weight_model(op_type):
    """DQ(x) -> <op_type> with a float32 weight initializer (and bias) -> Q: a QOperator model's
    ConvTranspose or Conv that the quantizer left float, as PP-OCRv4's detector has them."""
    rng = np.random.default_rng(21)
    g = Graph()
    x = g.node("DequantizeLinear", [g.input("xq", U8, [1, 3, 6, 6]), g.const("xs", F32(0.02)), g.const("xz", U8(120))], "x")
    weight = (rng.standard_normal((3, 4, 3, 3)) * 0.3).astype(F32)
    weight[0, 0, 0, 0] = -0.79  # an asymmetric range: the zero point is not 0
    y = g.node(op_type, [x, g.const("w", weight), g.const("b", rng.standard_normal(4).astype(F32))], "y")
    g.node("QuantizeLinear", [y, g.const("ys", F32(0.05)), g.const("yz", U8(128))], "q")
    g.output("q", U8, None)
    return g.model()


@pytest.mark.host_sensitive
@pytest.mark.parametrize("op_type", ["ConvTranspose", "Conv"])
def test_float_weight_quantized_as_onnxruntime_quantizes_it(op_type, tmp_path):
    """WeightBiasQuantization (weight_bias_quantization.cc) also quantizes a float32 weight
    initializer: GetQuantizationParameter<int8_t> (per tensor, asymmetric) and a Q that constant
    folding folds. dml_ep's codes, scale and zero point are onnxruntime's own, read from the
    optimized graph it writes; then the Conv rule fuses the Conv, and both run bit-exactly."""
    model = _float_weight_model(op_type)
    if op_type == "Conv":  # Conv wants [out, in, kh, kw]: 4 filters over 3 channels
        model.graph.initializer[2].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(model.graph.initializer[2]).transpose(1, 0, 2, 3).copy(), "w"))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    optimized = onnx.load(str(tmp_path / "optimized.onnx"))
    theirs = {i.name: numpy_helper.to_array(i) for i in optimized.graph.initializer}
    graph = rewrite(model)
    ours = {name: graph.constants[name] for name in graph.added_constants}
    for suffix in ("_weight_q", "_weight_scale", "_weight_zp"):
        name = f"y{suffix}"
        assert name in theirs and name in ours, name
        np.testing.assert_array_equal(ours[name], theirs[name], strict=True)
    assert int(ours["y_weight_zp"]) != 0
    if op_type == "Conv":
        assert ops(graph) == [("QLinearConv", "")]
    feeds = {"xq": np.random.default_rng(3).integers(0, 256, (1, 3, 6, 6)).astype(U8)}
    np.testing.assert_array_equal(dml_ep.InferenceSession(model, arithmetic="onnxruntime").run(None, feeds)[0],
                                  cpu_session(model, "ort").run(None, feeds)[0])
