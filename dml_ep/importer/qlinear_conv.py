"""QLinearConv -> DML_QUANTIZED_LINEAR_CONVOLUTION_OPERATOR_DESC, as DmlOperatorQLinearConv.cpp does it.

- 2-D convolution on 4-D tensors; a 1-D convolution ([N, C, W]) becomes 2-D with a height of 1:
  the DML EP inserts the 1 between C and W and pads 1-D strides/dilations/pads at the front.
- Filter scale/zero point per tensor {1,1,1,1} or per output channel {1,OC,1,1}; bias {1,OC,1,1}.
- auto_pad SAME_UPPER/SAME_LOWER/VALID resolve to explicit start/end padding (ConvolutionHelper).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidAttributeError, ShapeError
from ..operator_descs import DML_QUANTIZED_LINEAR_CONVOLUTION_OPERATOR_DESC, convolution_output_sizes
from ..plan import DmlNode
from ..real_ep import ASSIGNED_TO_DML
from .common import (
    Fallback,
    NodeContext,
    check_scale,
    check_zero_point,
    importer,
    output_type,
    parameter_tensor,
    quantized_type,
    tensor,
)

X, X_SCALE, X_ZP, W, W_SCALE, W_ZP, Y_SCALE, Y_ZP, BIAS = range(9)
# The desc field each QLinearConv input binds to, in input order (the bias is input 8, field 7).
FIELDS_BY_INPUT = (
    "InputTensor",
    "InputScaleTensor",
    "InputZeroPointTensor",
    "FilterTensor",
    "FilterScaleTensor",
    "FilterZeroPointTensor",
    "OutputScaleTensor",
    "OutputZeroPointTensor",
    "BiasTensor",
)


def _ints(ctx: NodeContext, name: str, default: list[int], count: int) -> list[int]:
    values = list(ctx.attr(name, default))
    if len(values) != count:
        raise InvalidAttributeError(f"{name} has {len(values)} values, expected {count}", node=ctx.node)
    return values


def resolve_padding(ctx, in_spatial, kernel, strides, dilations) -> tuple[list[int], list[int]]:
    """Start and end padding from ``pads`` or ``auto_pad``, as the DML EP's ConvolutionHelper resolves them."""
    rank = len(in_spatial)
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    if auto_pad == "NOTSET":
        pads = _ints(ctx, "pads", [0] * 2 * rank, 2 * rank)
        if any(p < 0 for p in pads):
            raise InvalidAttributeError(f"pads {pads} must not be negative", node=ctx.node)
        return pads[:rank], pads[rank:]
    if auto_pad == "VALID":
        return [0] * rank, [0] * rank
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise InvalidAttributeError(f"auto_pad {auto_pad!r} is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID", node=ctx.node)
    start, end = [], []
    for size, k, s, d in zip(in_spatial, kernel, strides, dilations):
        out = math.ceil(size / s)
        total = max(0, s * (out - 1) + (k - 1) * d + 1 - size)
        first = total // 2 if auto_pad == "SAME_UPPER" else (total + 1) // 2
        start.append(first)
        end.append(total - first)
    return start, end


@importer("QLinearConv")
def qlinear_conv(ctx: NodeContext) -> DmlNode:
    x_info, w_info = ctx.info(X), ctx.info(W)
    x_type = quantized_type(ctx, X, "input")
    w_type = quantized_type(ctx, W, "filter")
    rank = len(x_info.shape)
    if rank not in (3, 4):
        raise Fallback(f"{rank - 2}-D convolution is not supported (DirectML's QUANTIZED_LINEAR_CONVOLUTION is 1-D or 2-D)", ASSIGNED_TO_DML)
    if len(w_info.shape) != rank:
        raise ShapeError(f"filter has {len(w_info.shape)} dimensions, input has {rank}", node=ctx.node, tensor=ctx.input_name(W))
    spatial = rank - 2
    batch, channels, *in_spatial = x_info.shape
    out_channels, filter_channels, *kernel = w_info.shape
    kernel_shape = list(ctx.attr("kernel_shape", kernel))
    if kernel_shape != kernel:
        raise InvalidAttributeError(f"kernel_shape {kernel_shape} does not match the filter's {kernel}", node=ctx.node)
    strides = _ints(ctx, "strides", [1] * spatial, spatial)
    dilations = _ints(ctx, "dilations", [1] * spatial, spatial)
    if any(s < 1 for s in strides):
        raise InvalidAttributeError(f"strides {strides} must be positive", node=ctx.node)
    if any(d < 1 for d in dilations):
        raise InvalidAttributeError(f"dilations {dilations} must be positive", node=ctx.node)
    group = ctx.attr("group", 1)
    if group < 1 or channels % group or out_channels % group:
        raise InvalidAttributeError(
            f"group {group} must divide the input channels ({channels}) and output channels ({out_channels})", node=ctx.node
        )
    if filter_channels * group != channels:
        raise ShapeError(
            f"filter has {filter_channels} channels per group, input needs {channels // group} ({channels} / group {group})",
            node=ctx.node,
            tensor=ctx.input_name(W),
        )
    start, end = resolve_padding(ctx, in_spatial, kernel, strides, dilations)
    try:
        out_spatial = convolution_output_sizes(in_spatial, kernel, strides, dilations, start, end)
    except ValueError as exc:
        span, padded = exc.args
        raise ShapeError(f"the (dilated) kernel spans {span} but the padded input is only {padded}", node=ctx.node) from None

    check_scale(ctx, X_SCALE, ctx.constant(X_SCALE, "input scale"))
    w_scale = check_scale(ctx, W_SCALE, ctx.constant(W_SCALE, "filter scale"), (1, out_channels))
    check_scale(ctx, Y_SCALE, ctx.constant(Y_SCALE, "output scale"))
    x_zp = check_zero_point(ctx, X_ZP, ctx.optional_constant(X_ZP, "input zero point"), x_type)
    w_zp = check_zero_point(ctx, W_ZP, ctx.optional_constant(W_ZP, "filter zero point"), w_type, (1, out_channels))
    y_type = output_type(ctx)
    y_zp = check_zero_point(ctx, Y_ZP, ctx.optional_constant(Y_ZP, "output zero point"), y_type)
    if ctx.input_name(BIAS):
        bias_info = ctx.info(BIAS)
        if bias_info.dtype != np.int32 or bias_info.shape != (out_channels,):
            raise ShapeError(f"bias must be int32 of shape [{out_channels}], not {bias_info.dtype} {list(bias_info.shape)}", node=ctx.node, tensor=ctx.input_name(BIAS))

    # 1-D: [N, C, W] -> [N, C, 1, W]; parameters padded at the front (KernelArgs).
    pad1 = [1] * (2 - spatial)
    zero1 = [0] * (2 - spatial)
    in4 = (batch, channels, *pad1, *in_spatial)
    w4 = (out_channels, filter_channels, *pad1, *kernel)
    out4 = (batch, out_channels, *pad1, *out_spatial)
    scalar4 = (1, 1, 1, 1)
    channel4 = (1, out_channels, 1, 1)

    def per_channel(array):
        return parameter_tensor(array, channel4 if np.asarray(array).size > 1 else scalar4)

    desc = DML_QUANTIZED_LINEAR_CONVOLUTION_OPERATOR_DESC(
        InputTensor=tensor(x_type, in4),
        InputScaleTensor=tensor(np.float32, scalar4),
        InputZeroPointTensor=None if x_zp is None else tensor(x_type, scalar4),
        FilterTensor=tensor(w_type, w4, owned=ctx.input_name(W) in ctx.constants),
        FilterScaleTensor=per_channel(w_scale),
        FilterZeroPointTensor=None if w_zp is None else per_channel(w_zp),
        BiasTensor=None if not ctx.input_name(BIAS) else tensor(np.int32, channel4, owned=ctx.input_name(BIAS) in ctx.constants),
        OutputScaleTensor=tensor(np.float32, scalar4),
        OutputZeroPointTensor=None if y_zp is None else tensor(y_type, scalar4),
        OutputTensor=tensor(y_type, out4),
        DimensionCount=2,
        Strides=tuple(pad1 + strides),
        Dilations=tuple(pad1 + dilations),
        StartPadding=tuple(zero1 + start),
        EndPadding=tuple(zero1 + end),
        GroupCount=group,
    )
    return ctx.dml_node(desc, FIELDS_BY_INPUT, (batch, out_channels, *out_spatial))
