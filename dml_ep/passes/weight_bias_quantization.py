"""WeightBiasQuantization: a float weight and bias of a quantized Conv/ConvTranspose/Gemm become
int8 + DQ and int32 + DQ.

onnxruntime (1.20 and later) adds, when the node's input comes from a DQ with a per-tensor scale
and its output reaches a Q (through Relu/Clip at most) without branching:
``DQ(Cast<int32>(Round(bias / (x_scale * w_scale))), x_scale * w_scale)``, all in float32, which
constant folding then makes initializers. The Conv rule can then fuse the node with its bias.
dml_ep computes the same constants directly (numpy's float32 division and rint round as ONNX's
Div and Round do). A float32 weight initializer becomes int8 codes and a DQ (per tensor,
asymmetric: :func:`_quantize_weight`), after which the Conv rule can make a QLinearConv of a Conv;
a ConvTranspose or Gemm stays a float op, reading its weight through the DQ.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from ..numerics.kernels import quantize
from .editable import EditableGraph, Origin
from .qdq_util import is_dq, is_q, scalar_constant

NAME = "WeightBiasQuantization"
OPS = ("Conv", "ConvTranspose", "Gemm")


def weight_bias_quantization(graph: EditableGraph) -> bool:
    changed = False
    for node in list(graph.nodes):
        if node.op_type not in OPS or node.domain not in ("", "ai.onnx"):
            continue
        x_dq, w_dq = graph.producer(node.input[0]), graph.producer(node.input[1])
        x_scale = scalar_constant(graph, x_dq.input[1]) if is_dq(x_dq) else None
        if x_scale is None or not _reaches_q(graph, node):
            continue
        has_bias = len(node.input) > 2 and bool(node.input[2])
        bias = graph.constant(node.input[2]) if has_bias else None
        if has_bias and (bias is None or bias.ndim != 1 or bias.dtype != np.float32):
            continue
        if is_dq(w_dq):
            weight_scale = _dq_weight_scale(graph, node, w_dq, bias)
            if weight_scale is None:
                continue
            w_scale, per_channel = weight_scale
        else:
            weight = graph.constant(node.input[1])
            if weight is None or weight.dtype != np.float32:
                continue
            w_scale, per_channel = _quantize_weight(graph, node, weight), False
            changed = True
        if bias is None:
            continue
        _quantize_bias(graph, node, bias, x_scale, w_scale, per_channel)
        changed = True
    return changed


def _dq_weight_scale(graph: EditableGraph, node: onnx.NodeProto, w_dq: onnx.NodeProto,
                     bias: np.ndarray | None) -> tuple[np.ndarray, bool] | None:
    """The scale of a weight that already comes from a DQ, and whether it is per channel; None when
    there is no bias to quantize, or the scale is not a constant, or a per-channel scale is not a
    vector over the bias's channels along the node's output-channel axis."""
    if bias is None:  # nothing to quantize
        return None
    w_scale = graph.constant(w_dq.input[1])
    if w_scale is None:
        return None
    per_channel = w_scale.size != 1 or w_scale.ndim > 1
    if per_channel and (w_scale.ndim != 1 or w_scale.size != bias.size or _axis(node, w_dq, graph) != _expected_axis(node)):
        return None
    return w_scale, per_channel


def _quantize_bias(graph: EditableGraph, node: onnx.NodeProto, bias: np.ndarray, x_scale: np.ndarray,
                   w_scale: np.ndarray, per_channel: bool) -> None:
    """The float bias as ``DQ(int32 rint(bias / (x_scale * w_scale)), x_scale * w_scale)`` feeding
    ``node``, in float32 as onnxruntime's Div and Round (folded) compute it."""
    scale = np.asarray(x_scale.astype(np.float32) * w_scale.astype(np.float32), np.float32)  # 0-d stays an array
    quantized = np.rint(bias / scale).astype(np.int32)
    axis: dict[str, Any] = {"axis": 0} if per_channel else {}
    bias_dq = onnx.helper.make_node(
        "DequantizeLinear",
        [graph.add_constant(f"{node.name}_bias_int32", quantized), graph.add_constant(f"{node.name}_bias_scale", scale)],
        [graph.unique_name(f"{node.name}_bias_dq")],
        name=graph.unique_name(f"{node.name}_bias_dq"),
        **axis,
    )
    graph.insert_before(node, bias_dq, Origin((NAME,), ()), np.dtype(np.float32))
    node.input[2] = bias_dq.output[0]
    graph.changed(node)


def _quantize_weight(graph: EditableGraph, node: onnx.NodeProto, weight: np.ndarray) -> np.ndarray:
    """The float weight initializer as int8 codes and a DQ feeding ``node``; returns its scale.

    GetQuantizationParameter<int8_t> (core/util/qmath.h): the range [min, max] widened to hold 0,
    ``scale = (max - min) / 255`` (1 for an all-zero weight), ``zp = RoundHalfToEven(clamp(-128 -
    min / scale))``, all float32: per tensor and asymmetric, whatever the comment there says. The
    Q onnxruntime inserts is folded by its CPU QuantizeLinear kernel (MLAS), as here."""
    low, high = min(np.float32(weight.min()), np.float32(0)), max(np.float32(weight.max()), np.float32(0))
    scale = np.float32(1) if high == low else np.float32(high - low) / np.float32(255)
    zero_point = np.int8(np.rint(np.clip(np.float32(-128) - low / scale, -128, 127)))
    codes = quantize.mlas_codes(np.divide(weight, scale, dtype=np.float32), zero_point, np.int8)
    names = [graph.add_constant(f"{node.name}_weight_q", codes), graph.add_constant(f"{node.name}_weight_scale", np.array(scale, np.float32)),
             graph.add_constant(f"{node.name}_weight_zp", np.array(zero_point, np.int8))]
    weight_dq = onnx.helper.make_node("DequantizeLinear", names, [graph.unique_name(f"{node.name}_weight_dq")],
                                      name=graph.unique_name(f"{node.name}_weight_dq"))
    graph.insert_before(node, weight_dq, Origin((NAME,), ()), np.dtype(np.float32))
    node.input[1] = weight_dq.output[0]
    graph.changed(node)
    return np.array(scale, np.float32)


def _reaches_q(graph: EditableGraph, node: onnx.NodeProto) -> bool:
    """IsNoBranchPathToQuantizeLinear: one consumer at each step, Relu/Clip allowed, ending in a Q."""
    current = node
    while len(current.output) == 1:
        consumers = graph.consumers(current.output[0])
        if len(consumers) != 1:
            return False
        if is_q(consumers[0]):
            return True
        if consumers[0].op_type not in ("Relu", "Clip"):
            return False
        current = consumers[0]
    return False


def _axis(node, w_dq, graph) -> int:
    axis = next((a.i for a in w_dq.attribute if a.name == "axis"), 1)
    rank = graph.constant(w_dq.input[0]).ndim if graph.constant(w_dq.input[0]) is not None else None
    return axis + rank if axis < 0 and rank is not None else axis


def _expected_axis(node) -> int:
    if node.op_type != "Gemm":
        return 0
    return 0 if next((a.i for a in node.attribute if a.name == "transB"), 0) else 1
