"""QLinearAdd (com.microsoft) and Add / two-input Sum, as DmlOperatorQLinearAdd.cpp and DmlOperatorElementWise.cpp.

Every tensor is right-aligned to at least 4 dimensions (at most 8) and read with the output's sizes;
ONNX broadcasting is a stride of 0. QLinearAdd's scales and zero points get the same dimension count.

Add and Sum become ELEMENT_WISE_ADD1. A Relu or LeakyRelu that the DML EP's graph transformer
folded into them (com.microsoft.dml DmlFusedAdd/DmlFusedSum, made by passes/dml_fusion.py; its
fusion table lists Add 7/13/14 and Sum 8/13) becomes ADD1's FusedActivation. The real EP uses
ELEMENT_WISE_ADD for an Add with nothing to fuse: the same math as ADD1 without an activation.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import ShapeError
from ..operator_descs import (
    DML_ACTIVATION_LEAKY_RELU_OPERATOR_DESC,
    DML_ACTIVATION_RELU_OPERATOR_DESC,
    DML_ELEMENT_WISE_ADD1_OPERATOR_DESC,
    DML_ELEMENT_WISE_QUANTIZED_LINEAR_ADD_OPERATOR_DESC,
    QUANTIZED_BINARY_INPUTS,
)
from ..plan import DmlNode
from ..real_ep import ASSIGNED_TO_DML, ON_CPU, ON_DML, ON_DML_AS
from ..tensor_desc import broadcast_shapes, broadcast_strides, left_pad
from .common import Fallback, NodeContext, check_scale, check_zero_point, importer, output_type, quantized_type, tensor

MAX_DIMENSIONS = 8


def _broadcast(ctx: NodeContext, a_shape, b_shape) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The ONNX output shape and the DirectML sizes (right-aligned, at least 4-D)."""
    try:
        out_shape = broadcast_shapes(a_shape, b_shape)
    except ValueError:
        raise ShapeError(f"input shapes {list(a_shape)} and {list(b_shape)} do not broadcast", node=ctx.node) from None
    if len(out_shape) > MAX_DIMENSIONS:
        raise Fallback(f"{len(out_shape)} dimensions (DirectML supports at most {MAX_DIMENSIONS})", ASSIGNED_TO_DML)
    return out_shape, left_pad(out_shape, max(4, len(out_shape)))


def _operand(dtype, shape, sizes, owned=False):
    return tensor(dtype, sizes, broadcast_strides(shape, sizes), owned=owned)


@importer("QLinearAdd", "com.microsoft")
def qlinear_add(ctx: NodeContext) -> DmlNode:
    a_type = quantized_type(ctx, 0, "A")
    b_type = quantized_type(ctx, 3, "B")
    a_shape, b_shape = ctx.info(0).shape, ctx.info(3).shape
    out_shape, sizes = _broadcast(ctx, a_shape, b_shape)
    for index, what in ((1, "A scale"), (4, "B scale"), (6, "output scale")):
        check_scale(ctx, index, ctx.constant(index, what))
    a_zp = check_zero_point(ctx, 2, ctx.optional_constant(2, "A zero point"), a_type)
    b_zp = check_zero_point(ctx, 5, ctx.optional_constant(5, "B zero point"), b_type)
    c_type = output_type(ctx)
    c_zp = check_zero_point(ctx, 7, ctx.optional_constant(7, "output zero point"), c_type)
    ones = (1,) * len(sizes)
    desc = DML_ELEMENT_WISE_QUANTIZED_LINEAR_ADD_OPERATOR_DESC(
        ATensor=_operand(a_type, a_shape, sizes, ctx.input_name(0) in ctx.constants),
        AScaleTensor=tensor(np.float32, ones),
        AZeroPointTensor=None if a_zp is None else tensor(a_type, ones),
        BTensor=_operand(b_type, b_shape, sizes, ctx.input_name(3) in ctx.constants),
        BScaleTensor=tensor(np.float32, ones),
        BZeroPointTensor=None if b_zp is None else tensor(b_type, ones),
        OutputScaleTensor=tensor(np.float32, ones),
        OutputZeroPointTensor=None if c_zp is None else tensor(c_type, ones),
        OutputTensor=tensor(c_type, sizes),
    )
    return ctx.dml_node(desc, QUANTIZED_BINARY_INPUTS, out_shape)


def _add1(ctx: NodeContext) -> DmlNode:
    dtype = ctx.info(0).dtype
    if dtype not in (np.dtype(np.float32), np.dtype(np.float16)):
        real_ep = ON_DML_AS.format("ELEMENT_WISE_ADD") if dtype.kind in "iu" else ON_CPU
        raise Fallback(f"element type {dtype} is not supported by ELEMENT_WISE_ADD1 (FLOAT32, FLOAT16)", real_ep)
    if ctx.info(1).dtype != dtype:
        raise ShapeError(f"input types differ: {dtype} and {ctx.info(1).dtype}", node=ctx.node)
    a_shape, b_shape = ctx.info(0).shape, ctx.info(1).shape
    out_shape, sizes = _broadcast(ctx, a_shape, b_shape)
    desc = DML_ELEMENT_WISE_ADD1_OPERATOR_DESC(
        ATensor=_operand(dtype, a_shape, sizes, ctx.input_name(0) in ctx.constants),
        BTensor=_operand(dtype, b_shape, sizes, ctx.input_name(1) in ctx.constants),
        OutputTensor=tensor(dtype, sizes),
    )
    return ctx.dml_node(desc, ("ATensor", "BTensor"), out_shape)


@importer("Add")
def add(ctx: NodeContext) -> DmlNode:
    if ctx.opset < 7:
        raise Fallback(f"Add-{ctx.opset} (legacy broadcast attribute) is not mapped; the DML EP registers Add 7, 13, 14", ON_CPU)
    return _add1(ctx)


@importer("Sum")
def sum_(ctx: NodeContext) -> DmlNode:
    if ctx.opset < 8:
        raise Fallback(f"Sum-{ctx.opset} is not mapped (Sum 8 and 13 with two inputs)", ON_CPU)
    if len(ctx.node.input) != 2:
        raise Fallback(f"Sum with {len(ctx.node.input)} inputs (only a two-input Sum is one DirectML operator)", ON_DML_AS.format("ELEMENT_WISE_ADD, once per input"))
    return _add1(ctx)


@importer("DmlFusedAdd", "com.microsoft.dml")
@importer("DmlFusedSum", "com.microsoft.dml")
def fused_add(ctx: NodeContext) -> DmlNode:
    """Add or two-input Sum with the activation the DML EP's fusion folded into it (passes/dml_fusion.py)."""
    if ctx.node.op_type == "DmlFusedSum" and len(ctx.node.input) != 2:
        raise Fallback(f"Sum with {len(ctx.node.input)} inputs (only a two-input Sum is one DirectML operator)", ON_DML_AS.format("ELEMENT_WISE_ADD, once per input"))
    entry = _add1(ctx)
    entry.desc = dataclasses.replace(entry.desc, FusedActivation=fused_activation(ctx))
    return entry


def fused_activation(ctx: NodeContext):
    """The DirectML activation desc named by a fused node's ``fused_*`` attributes."""
    activation = ctx.attr("fused_activation")
    if activation == "Relu":
        return DML_ACTIVATION_RELU_OPERATOR_DESC()
    if activation == "LeakyRelu":
        return DML_ACTIVATION_LEAKY_RELU_OPERATOR_DESC(Alpha=float(np.float32(ctx.attr("fused_alpha", 0.01))))
    raise Fallback(f"fused activation {activation!r} is not modelled by dml_ep (Relu, LeakyRelu)", ON_DML)
