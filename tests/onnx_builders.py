"""Single-node ONNX models for differential tests, and the exact references they are judged by.

Builders return ``(model, feeds)``: operands wrapped in :class:`Feed` become graph inputs (bound at
run time), every other operand an initializer, ``None`` an omitted optional input.

The exactness helpers follow DirectML's definition, "dequantize, compute, quantize", in exact
rational arithmetic: a quantized output is ``clamp(round_half_even(num / den) + zp)`` with Python
integers ``num`` and ``den``, so no float rounding is involved in the reference.

A section builds small QDQ graphs for the tests of the graph rewrites (``dml_ep.passes``) and
runs onnxruntime's QDQ passes on them, as dml_ep emulates them. The last builds the other models
tests share: graphs of several nodes, QuantizeLinear/DequantizeLinear-21's parameters, ConvInteger,
the com.microsoft QLinearConcat, QLinearSigmoid, DynamicQuantizeMatMul and MatMulNBits, and
scripts/scale_bench.py's graphs of N nodes.
"""

from __future__ import annotations

import collections
import dataclasses
import importlib.util
from fractions import Fraction
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import dml_ep
import dml_ep.numerics.arithmetic
from dml_ep.core import nibbles
from dml_ep.ort.reference import cpu_session
from dml_ep.passes import DML, EditableGraph, qdq_transformer

# Opset 19 keeps QLinearMatMul at version 10, which session.x64quantprecision covers.
OPSET = 19


@dataclasses.dataclass(frozen=True)
class Feed:
    """An operand that is a graph input, fed at run time, instead of an initializer."""

    value: np.ndarray


def single_node_model(op_type, operands, out_dtype, out_rank, domain="", consumer=None, opset=OPSET, **attributes):
    """A model of one node (plus an optional single-input ``consumer`` node name, attributes), of
    the ai.onnx ``opset``.

    ``operands`` are arrays (initializers), :class:`Feed` (inputs) or None (omitted).
    """
    inputs, initializers, names, feeds = [], [], [], {}
    for index, operand in enumerate(operands):
        if operand is None:
            names.append("")
            continue
        name = f"in{index}"
        names.append(name)
        if isinstance(operand, Feed):
            value = np.asarray(operand.value)
            feeds[name] = value
            inputs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape))
        else:
            initializers.append(numpy_helper.from_array(np.asarray(operand), name))
    out_type = helper.np_dtype_to_tensor_dtype(np.dtype(out_dtype))
    nodes = [helper.make_node(op_type, names, ["y"], domain=domain, **attributes)]
    if consumer is not None:
        consumer_type, consumer_attributes = consumer
        nodes[0].output[0] = "pre"
        nodes.append(helper.make_node(consumer_type, ["pre"], ["y"], **consumer_attributes))
    output = helper.make_tensor_value_info("y", out_type, [None] * out_rank)
    graph = helper.make_graph(nodes, f"single_{op_type}", inputs, [output], initializers)
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    model = helper.make_model(graph, opset_imports=opsets)
    onnx.checker.check_model(model)
    return model, feeds


def _value(operand):
    return None if operand is None else np.asarray(operand.value if isinstance(operand, Feed) else operand)


def qlinear_conv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias=None, **attributes):
    """QLinearConv; ``x`` is fed unless given as an array; ``attributes`` are the node's."""
    operands = [_feed(x), x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias]
    out_dtype = np.uint8 if y_zp is None else np.asarray(y_zp).dtype
    return single_node_model("QLinearConv", operands, out_dtype, _value(x).ndim, **attributes)


def qlinear_matmul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp):
    """QLinearMatMul; wrap ``b`` (or ``a``) in Feed to bind it at run time; ``a`` is always fed."""
    operands = [_feed(a), a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp]
    out_rank = len(np.matmul(np.zeros(_value(a).shape, np.int8), np.zeros(_value(b).shape, np.int8)).shape)
    return single_node_model("QLinearMatMul", operands, np.asarray(y_zp).dtype, out_rank)


def qlinear_add(a, a_scale, a_zp, b, b_scale, b_zp, c_scale, c_zp):
    """com.microsoft QLinearAdd with both data operands fed."""
    operands = [_feed(a), a_scale, a_zp, _feed(b), b_scale, b_zp, c_scale, c_zp]
    out_rank = len(np.broadcast_shapes(_value(a).shape, _value(b).shape))
    out_dtype = _value(a).dtype if c_zp is None else np.asarray(c_zp).dtype
    return single_node_model("QLinearAdd", operands, out_dtype, out_rank, domain="com.microsoft")


def add(a, b, op_type="Add", activation=None, **activation_attributes):
    """Add (or a two-input Sum) of two fed operands, optionally consumed by an activation node."""
    consumer = None if activation is None else (activation, activation_attributes)
    out_rank = len(np.broadcast_shapes(np.shape(a), np.shape(b)))
    return single_node_model(op_type, [_feed(a), _feed(b)], np.asarray(a).dtype, out_rank, consumer=consumer)


def _feed(operand):
    return operand if isinstance(operand, Feed) else Feed(np.asarray(operand))


# --- running ---------------------------------------------------------------------------------


def run_dml(model, feeds, arithmetic):
    return dml_ep.InferenceSession(model, arithmetic=arithmetic).run(None, feeds)[0]


def run_ort(model, feeds, reference):
    return cpu_session(model, reference, threads=1).run(None, feeds)[0]


def assert_onnxruntime_mode_exact(model, feeds):
    """arithmetic="onnxruntime" reproduces onnxruntime's CPU EP bit for bit."""
    expected = run_ort(model, feeds, "ort")
    actual = run_dml(model, feeds, "onnxruntime")
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    mismatch = np.flatnonzero(actual != expected)
    assert mismatch.size == 0, (
        f"{mismatch.size}/{actual.size} differ, first at {mismatch[:5]}: "
        f"dml_ep {actual.reshape(-1)[mismatch[:5]]} onnxruntime {expected.reshape(-1)[mismatch[:5]]}"
    )


# --- exact references -------------------------------------------------------------------------


def ratio(value) -> tuple[int, int]:
    """A float (float32 scale) as an exact (numerator, denominator) of Python ints."""
    return Fraction(float(value)).as_integer_ratio()


def objects(array) -> np.ndarray:
    """An integer array as Python ints (object dtype), so exact products cannot overflow."""
    out = np.empty(np.shape(array), dtype=object)
    out[...] = np.asarray(array, dtype=np.int64).tolist()
    return out


def round_half_even(num, den) -> np.ndarray:
    """round(num / den), ties to even, for object arrays of Python ints (den > 0)."""
    quotient = num // den  # np.divmod has no object loop
    remainder = num - quotient * den
    twice = 2 * remainder
    up = np.asarray((twice > den) | ((twice == den) & (quotient % 2 == 1)))  # 0-d object ops give Python bools
    return quotient + up.astype(np.int64)


def quantize_exact(num, den, zero_point, dtype) -> np.ndarray:
    """DirectML's ``clamp(round(value) + zp)`` of the exact value ``num / den``."""
    info = np.iinfo(dtype)
    rounded = round_half_even(num, den) + np.asarray(zero_point, dtype=np.int64)
    return np.clip(rounded.astype(np.int64), info.min, info.max).astype(dtype)


def classify_mismatches(ours, theirs, num, den, error_bound, zero_point) -> collections.Counter:
    """Explain every element where dml_ep's correctly rounded output differs from onnxruntime's.

    onnxruntime computes the value in float32 (rounded multipliers, products or FMA chains), so it
    may land on the other side of a rounding boundary than the exact value ``num / den + zero_point``.
    A difference is explained when it is 1 step and the exact value is either an exact tie ("tie":
    onnxruntime's float error picks a side, DirectML rounds to even) or within ``error_bound``
    (output units: onnxruntime's worst float32 error there) of the half-integer between the two
    outputs ("float rounding"). Returns the counts; fails on anything else.
    """
    ours, theirs = np.atleast_1d(ours).astype(np.int64), np.atleast_1d(theirs).astype(np.int64)  # 0-d: matmul of 1-D
    num, den, bound, zero_point = (np.broadcast_to(v, ours.shape) for v in (num, den, error_bound, zero_point))
    counts = collections.Counter()
    for index in zip(*np.nonzero(ours != theirs)):
        what = f"at {index}: dml_ep {ours[index]}, onnxruntime {theirs[index]}"
        assert abs(ours[index] - theirs[index]) == 1, f"{what}: more than 1 step"
        value = Fraction(num[index], den[index]) + int(zero_point[index])
        boundary = Fraction(2 * int(min(ours[index], theirs[index])) + 1, 2)
        distance = abs(value - boundary)
        assert distance <= Fraction(float(bound[index])), (
            f"{what}: exact value {float(value)!r} is {float(distance):.3g} from {float(boundary)}, "
            f"beyond onnxruntime's float32 error bound {float(bound[index]):.3g}"
        )
        counts["tie" if distance == 0 else "float rounding"] += 1
    return counts


def saturated_by_onnxruntime(model, feeds, theirs) -> np.ndarray:
    """Where onnxruntime's output is its int16 pair saturation (AVX2 CPUs without VNNI): "ort-exact"
    only makes constant int8 weights of opset-10 nodes exact, so runtime or opset-21 B operands still
    saturate there. Those elements equal dml_ep's saturating emulation and differ without it."""
    if not dml_ep.numerics.arithmetic.host_saturates_u8s8():
        return np.zeros(np.shape(theirs), dtype=bool)
    with_saturation = dml_ep.InferenceSession(model, arithmetic="onnxruntime", u8s8_saturation=True).run(None, feeds)[0]
    without = dml_ep.InferenceSession(model, arithmetic="onnxruntime", u8s8_saturation=False).run(None, feeds)[0]
    return (with_saturation != without) & (theirs == with_saturation)


def check_directml_mode(op, model, feeds, num, den, zero_point, error_bound, reference="ort-exact") -> collections.Counter:
    """arithmetic="directml" gives the correctly rounded exact value ``num / den`` (plus zero point);
    onnxruntime with exact integer GEMMs differs from it only where :func:`classify_mismatches` explains.

    ``reference`` is "ort" where "ort-exact" cannot run and plain onnxruntime is exact anyway
    (int8-activation QLinearConv: its int8 weights become uint8, which has no kernel).
    """
    actual = run_dml(model, feeds, "directml")
    expected = quantize_exact(num, den, zero_point, actual.dtype)
    wrong = np.flatnonzero(actual != expected)
    assert wrong.size == 0, (
        f"{wrong.size}/{actual.size} not correctly rounded, first at {wrong[:5]}: "
        f"dml_ep {actual.reshape(-1)[wrong[:5]]} exact {expected.reshape(-1)[wrong[:5]]}"
    )
    theirs = run_ort(model, feeds, reference)
    saturated = saturated_by_onnxruntime(model, feeds, theirs)
    counts = classify_mismatches(actual, np.where(saturated, actual, theirs), num, den, error_bound, zero_point)
    counts["u8s8 saturation"] += int(np.count_nonzero(saturated))
    return counts


# --- QDQ graphs for the graph-rewrite tests (dml_ep.passes) ---------------------------------------
# Small graphs of QDQ groups (opset 17, ir_version 8, uint8 activations, int8 weights) and the helpers
# that run onnxruntime's QDQ passes on them, as dml_ep emulates them, and read the result.

U8, S8, U16, I32, F32 = np.uint8, np.int8, np.uint16, np.int32, np.float32
MS = "com.microsoft"
ALL_RULE_SETS = ("1.24+", "1.20-1.23", "1.17-1.19")


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


# --- running the QDQ passes -----------------------------------------------------------------------


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


# --- other models: several nodes, Q/DQ-21, the integer and contrib ops, scripts/scale_bench.py's graphs ---------


def make(nodes, inputs, outputs, initializers=(), value_info=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers), value_info=list(value_info))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def symbolic_conv():
    """A QLinearConv 3x3 (no padding) on an input [N, 2, H, W]."""
    model, _ = qlinear_conv(x=Feed(np.zeros((1, 2, 5, 5), np.uint8)), x_scale=np.float32(0.1), x_zp=np.uint8(128),
                            w=(np.arange(72).reshape(4, 2, 3, 3) % 7 - 3).astype(np.int8), w_scale=np.float32(0.05),
                            w_zp=np.int8(0), y_scale=np.float32(0.2), y_zp=np.uint8(128), bias=np.arange(4, dtype=np.int32))
    dims = model.graph.input[0].type.tensor_type.shape.dim
    for dim, name in zip(dims, ("N", None, "H", "W")):
        if name:
            dim.dim_param = name
    model.graph.output[0].type.tensor_type.ClearField("shape")
    return model


def parameters(code_type, scale, zero_point, axis, block_size) -> tuple[list, dict]:
    """A Q/DQ-21's zero point initializer ``z`` (none where ``zero_point`` is None) and attributes."""
    zero_points = [] if zero_point is None else [helper.make_tensor("z", code_type, list(np.shape(zero_point)), np.reshape(zero_point, -1).tolist())]
    attributes = {"axis": axis} if np.size(scale) > 1 else {}
    if block_size:
        attributes["block_size"] = block_size
    return zero_points, attributes


def conv_integer(x, w, x_zp=None, w_zp=None, **attributes):
    """A ConvInteger model: x fed, w and the zero points initializers unless wrapped in Feed."""
    return single_node_model("ConvInteger", [Feed(x), w, x_zp, w_zp], np.int32, np.ndim(x), **attributes)


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


def qlinear_sigmoid(dtype, x_scale, x_zero_point, y_scale, y_zero_point, shape=(4, 64), inputs=5, feed_scales=False):
    """A one-node QLinearSigmoid model; parameters constant, or graph inputs with ``feed_scales``."""
    element = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    parameters = [("xs", np.array(x_scale, np.float32)), ("xz", np.array(x_zero_point, dtype)),
                  ("ys", np.array(y_scale, np.float32)), ("yz", np.array(y_zero_point, dtype))]
    parameters = [parameters[i] for i in ((0, 1, 2, 3) if inputs == 5 else (0, 1, 2))]
    node = helper.make_node("QLinearSigmoid", ["x", *(name for name, _ in parameters)], ["y"], domain="com.microsoft", name="qsig")
    graph_inputs = [helper.make_tensor_value_info("x", element, shape)]
    initializers = []
    for name, value in parameters:
        if feed_scales:
            graph_inputs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape))
        else:
            initializers.append(numpy_helper.from_array(value, name))
    graph = helper.make_graph([node], "qlinear_sigmoid", graph_inputs, [helper.make_tensor_value_info("y", element, shape)], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)], ir_version=8)
    return model, {name: value for name, value in parameters} if feed_scales else {}


K, N = 8, 6  # DynamicQuantizeMatMul's weight is [K, N]


def dynamic_quantize_matmul(b_type=np.uint8):
    rng = np.random.default_rng(1)
    b = rng.integers(0, 256, (K, N)).astype(np.uint8) if b_type == np.uint8 else rng.integers(-128, 128, (K, N)).astype(np.int8)
    initializers = [numpy_helper.from_array(b, "b"), numpy_helper.from_array(np.array(0.03, np.float32), "b_scale"),
                    numpy_helper.from_array(np.array(7, b_type), "b_zp"), numpy_helper.from_array(rng.standard_normal(N).astype(np.float32), "bias")]
    node = helper.make_node("DynamicQuantizeMatMul", ["x", "b", "b_scale", "b_zp", "bias"], ["y"], domain="com.microsoft", name="dqmm")
    graph = helper.make_graph([node], "dqmm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, K])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)], ir_version=8)


def matmul_nbits(k, n, block_size, bits=4, zero_points=True, float_type=F32, accuracy_level=0, seed=0, bias=False, a_shape=None):
    """A MatMulNBits node's model, B and zero points random codes, scales random and positive."""
    rng = np.random.default_rng(seed)
    blocks = -(-k // block_size)
    codes = rng.integers(0, 1 << bits, (n, blocks * block_size))
    b = (nibbles.pack(codes) if bits == 4 else codes.astype(np.uint8)).reshape(n, blocks, block_size * bits // 8)
    inits = [numpy_helper.from_array(b, "b"), numpy_helper.from_array((rng.random((n, blocks)) * 0.1 + 0.01).astype(float_type), "s")]
    inputs = ["a", "b", "s"]
    if zero_points:
        zp = rng.integers(0, 1 << bits, (n, blocks))
        zp = nibbles.pack(zp) if bits == 4 else zp.astype(np.uint8)
        inits.append(numpy_helper.from_array(zp, "z"))
        inputs.append("z")
    if bias:  # input 5, after the zero points and g_idx (omitted where absent)
        inputs += [""] * (5 - len(inputs)) + ["bias"]
        inits.append(numpy_helper.from_array(np.zeros(n, float_type), "bias"))
    element = helper.np_dtype_to_tensor_dtype(np.dtype(float_type))
    node = helper.make_node("MatMulNBits", inputs, ["y"], domain="com.microsoft", K=k, N=n, bits=bits, block_size=block_size,
                            accuracy_level=accuracy_level)
    graph = helper.make_graph([node], "matmul_nbits", [helper.make_tensor_value_info("a", element, a_shape or ["m", k])],
                              [helper.make_tensor_value_info("y", element, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)], ir_version=10)


def with_accuracy_level(model, level):
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for attribute in copy.graph.node[0].attribute:
        if attribute.name == "accuracy_level":
            attribute.i = level
    return copy


ROOT = Path(__file__).resolve().parent.parent


def _scale_bench():
    spec = importlib.util.spec_from_file_location("scale_bench", ROOT / "scripts" / "scale_bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


scale_bench = _scale_bench()  # its graphs of N nodes: shared_dq, fallback_chain, fallback_wide, dml_chain


def rotary_embedding(dtype=np.float16, rank=3, batch=2, sequence=3, heads=2, head_size=8, rotary=0, interleaved=0, offset=None,
                     rows=10, seed=0):
    """com.microsoft RotaryEmbedding on a fed input (3-D [B, S, N*H] or 4-D [B, N, S, H]) and position ids (2-D, or
    the 1-D ``offset``), cos/sin caches of ``rows`` positions as initializers; ``rotary`` > 0 sets
    ``rotary_embedding_dim`` (and num_heads). Returns the model and its feeds."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, sequence, heads * head_size) if rank == 3 else (batch, heads, sequence, head_size)).astype(dtype)
    angles = np.arange(rows)[:, None] * rng.uniform(0.05, 1.0, (rotary or head_size) // 2)[None]
    cos, sin = np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)
    positions = (np.array([offset], np.int64) if offset is not None
                 else rng.integers(0, rows, (batch, sequence)).astype(np.int64))
    attributes = {"interleaved": interleaved, **({"rotary_embedding_dim": rotary, "num_heads": heads} if rotary else {})}
    return single_node_model("RotaryEmbedding", [Feed(x), Feed(positions), cos, sin], dtype, rank, domain="com.microsoft", **attributes)


def planned_node(op_type, operands, out_dtype, out_rank=None, **kwargs):
    """A one-node model of ``operands`` (all fed) planned by dml_ep: (session, its one plan entry, model, feeds)."""
    rank = max(np.ndim(x) for x in operands) if out_rank is None else out_rank
    model, feeds = single_node_model(op_type, [Feed(x) for x in operands], out_dtype, rank, **kwargs)
    session = dml_ep.InferenceSession(model)
    entry, = session.plan.entries
    return session, entry, model, feeds
