"""What the sliding-window operators share (convolutions, pooling): the ONNX window attributes
read as the DML EP's OperatorHelper.cpp reads them (InitializeKernel, ResolveAutoPadding) and the
output size per spatial dimension (InitializeKernelOutputDimensions).

InitializeKernel reads strides, dilations, pads and kernel_shape clamped into int32
(:func:`~dml_ep.operators.importing.as_int32`); where the clamp changes the output size, the DML
EP fails creating the kernel (``importer.verify_output_shapes``).
"""

from __future__ import annotations

import math

from ..core.errors import InvalidAttributeError
from .importing import NodeContext, as_int32


def output_sizes(in_spatial, kernel, strides, dilations, start_padding, end_padding, ceil: bool = False) -> tuple[int, ...]:
    """Output size per spatial dimension: (padded input - dilated kernel) // stride + 1, plus one
    where ``ceil`` (the DML EP's ceil_mode) and the division leaves a remainder.

    ValueError(span, padded input) when the dilated kernel is larger than the padded input.
    """
    sizes = []
    for size, k, s, d, p0, p1 in zip(in_spatial, kernel, strides, dilations, start_padding, end_padding):
        span, padded = (k - 1) * d + 1, size + p0 + p1
        if padded < span:
            raise ValueError(span, padded)
        sizes.append((padded - span) // s + 1 + int(ceil and (padded - span) % s != 0))
    return tuple(sizes)


def int_list(ctx: NodeContext, name: str, default: list[int], count: int) -> list[int]:
    """An ints attribute of exactly ``count`` values (``default`` when absent or empty: the DML EP's
    HasAttribute counts elements), each clamped into int32 as the DML EP reads it."""
    values = list(ctx.attr(name) or default)
    if len(values) != count:
        raise InvalidAttributeError(f"{name} has {len(values)} values, expected {count}", node=ctx.node)
    return as_int32(values)


def positive(ctx: NodeContext, name: str, count: int) -> list[int]:
    """strides or dilations: ``count`` values, 1 each by default, all at least 1."""
    values = int_list(ctx, name, [1] * count, count)
    if any(v < 1 for v in values):
        raise InvalidAttributeError(f"{name} {values} must be positive", node=ctx.node)
    return values


def resolve_padding(ctx, in_spatial, kernel, strides, dilations) -> tuple[list[int], list[int]]:
    """Start and end padding from ``pads`` or ``auto_pad``, as the DML EP's ConvolutionHelper resolves them."""
    rank = len(in_spatial)
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    if auto_pad == "NOTSET":
        pads = int_list(ctx, "pads", [0] * 2 * rank, 2 * rank)
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
