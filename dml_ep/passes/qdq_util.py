"""What the QDQ passes ask of Q and DQ nodes: matching, types, constant scalar parameters (qdq_util.cc)."""

from __future__ import annotations

from typing import TypeGuard

import numpy as np
import onnx

from .editable import EditableGraph

Q, DQ = "QuantizeLinear", "DequantizeLinear"
QDQ_DOMAINS = ("", "ai.onnx", "com.microsoft")
SIXTEEN_BIT = {np.dtype(np.int16), np.dtype(np.uint16)}


def is_q(node: onnx.NodeProto | None) -> TypeGuard[onnx.NodeProto]:
    return node is not None and node.op_type == Q and node.domain in QDQ_DOMAINS


def is_dq(node: onnx.NodeProto | None) -> TypeGuard[onnx.NodeProto]:
    return node is not None and node.op_type == DQ and node.domain in QDQ_DOMAINS


def input_type(graph: EditableGraph, dq: onnx.NodeProto) -> np.dtype | None:
    """The quantized element type a DQ reads."""
    return graph.dtype(dq.input[0])


def output_type(graph: EditableGraph, q: onnx.NodeProto) -> np.dtype:
    """The quantized element type a Q writes: its zero point's, else ``output_dtype``, else uint8."""
    if len(q.input) > 2 and q.input[2]:
        zero_point = graph.dtype(q.input[2])
        if zero_point is not None:
            return zero_point
    for attribute in q.attribute:
        if attribute.name == "output_dtype" and attribute.i:
            return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(attribute.i))
    return np.dtype(np.uint8)


def is_4bit(dtype) -> bool:
    return dtype is not None and str(dtype) in ("int4", "uint4")


def narrow_type_problem(dtype, allow_16bit: bool = False, allow_4bit: bool = False) -> str | None:
    """Why a quantized type keeps a group unfused (16-bit and 4-bit types are refused by default)."""
    if not allow_16bit and dtype in SIXTEEN_BIT:
        return f"16-bit type {dtype} is not fused"
    if not allow_4bit and is_4bit(dtype):
        return f"4-bit type {dtype} is not fused"
    return None


def scalar_constant(graph: EditableGraph, name: str) -> np.ndarray | None:
    """A constant of rank 0 or shape [1], as rank 0; None when not a constant scalar."""
    value = graph.constant(name)
    if value is None or value.ndim > 1 or value.size != 1:
        return None
    return value.reshape(())


def is_qdq_pair_supported(graph: EditableGraph, q: onnx.NodeProto, dq: onnx.NodeProto) -> bool:
    """IsQDQPairSupported: both have all three inputs, constant scalars, and equal scale and zero point."""
    if len(q.input) != 3 or len(dq.input) != 3 or not all(q.input) or not all(dq.input):
        return False
    q_scale, q_zp, dq_scale, dq_zp = (scalar_constant(graph, name) for name in (q.input[1], q.input[2], dq.input[1], dq.input[2]))
    if q_scale is None or q_zp is None or dq_scale is None or dq_zp is None:
        return False
    return q_zp.dtype == dq_zp.dtype and q_zp == dq_zp and q_scale == dq_scale


def is_positive_scalar_scale(graph: EditableGraph, node: onnx.NodeProto) -> bool:
    scale = scalar_constant(graph, node.input[1]) if len(node.input) > 1 else None
    return scale is not None and scale.dtype.kind == "f" and float(scale) > 0
