"""DML_OPERATOR_QUANTIZED_LINEAR_CONVOLUTION.

DirectML: ``Output = Quantize(Convolve(Dequantize(Input), Dequantize(Filter)) + Bias * InputScale *
FilterScale, OutputScale, OutputZeroPoint)``; since the bias is int32 in units of
``InputScale * FilterScale``, this is ``round((acc + Bias) * InputScale * FilterScale / OutputScale)``
with ``acc = sum((x - zx) * (w - zw))`` over the window, padding reading as the input zero point.

The integer core computes ``acc`` exactly, channels last: im2col of the input codes in NHWC order
(a window view of the input padded with its zero point, one copy; none for an unpadded 1x1
convolution with unit strides), times the filter as a [KH*KW*C/G, OC/G] matrix per group, on the
session's integer engine (``dml_ep.engines``). The filter is prepared once per engine. Then the
shared requantize step (``quantize.requantize_product``). The output is written channels last and
returned as an NCHW view of that memory: a DirectML tensor is sizes plus strides, so the next
convolution reads it without a transpose.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..enums import DML_TENSOR_FLAGS
from . import quantize, u8s8
from .parameters import parameter4d, read4d, scalar


def filter_matrix(desc, tensors) -> tuple[np.ndarray, np.ndarray]:
    """The filter codes as the GEMM's B, [K, OC] (or [G, K, OC/G] for grouped convolutions) with
    K ordered (kernel row, kernel column, input channel) as the NHWC columns are; and its zero
    points per output column."""
    w = read4d(tensors, desc, "FilterTensor")
    out_channels, group_channels, kh, kw = w.shape
    groups = desc.GroupCount
    b = w.reshape(groups, out_channels // groups, group_channels, kh, kw).transpose(0, 3, 4, 2, 1)
    b = b.reshape(groups, kh * kw * group_channels, out_channels // groups)
    zero_point = parameter4d(tensors, desc, "FilterZeroPointTensor")
    zero_point = np.broadcast_to(zero_point.reshape(-1), (out_channels,)).reshape(groups, -1).astype(np.int64)
    if groups == 1:
        return b[0], zero_point[0]
    return b, zero_point


def im2col(x_nhwc: np.ndarray, desc, kernel: tuple[int, int], pad_code) -> np.ndarray:
    """Input codes [N, H, W, C] as GEMM rows [N*OH*OW, KH*KW*C] (or [G, N*OH*OW, KH*KW*C/G]);
    padding reads as ``pad_code``, the input zero point."""
    (pad_top, pad_left), (pad_bottom, pad_right) = desc.StartPadding, desc.EndPadding
    (stride_h, stride_w), (dilation_h, dilation_w) = desc.Strides, desc.Dilations
    batch, height, width, channels = x_nhwc.shape
    groups = desc.GroupCount
    if kernel == (1, 1) and not any(desc.StartPadding + desc.EndPadding):
        rows = x_nhwc[:, ::stride_h, ::stride_w]
        columns = rows.reshape(-1, channels)
    else:
        padded = x_nhwc
        if any(desc.StartPadding + desc.EndPadding):
            padded = np.empty((batch, height + pad_top + pad_bottom, width + pad_left + pad_right, channels), x_nhwc.dtype)
            padded[...] = pad_code
            padded[:, pad_top : pad_top + height, pad_left : pad_left + width] = x_nhwc
        span = ((kernel[0] - 1) * dilation_h + 1, (kernel[1] - 1) * dilation_w + 1)
        windows = sliding_window_view(padded, span, axis=(1, 2))[:, ::stride_h, ::stride_w, :, ::dilation_h, ::dilation_w]
        columns = windows.transpose(0, 1, 2, 4, 5, 3).reshape(-1, kernel[0] * kernel[1] * channels)  # N OH OW KH KW C
    if groups == 1:
        return columns
    rows = columns.shape[0]
    return columns.reshape(rows, kernel[0] * kernel[1], groups, -1).transpose(2, 0, 1, 3).reshape(groups, rows, -1)


def convolution_accumulator(desc, tensors: dict, engine, cache: dict) -> np.ndarray:
    """The integer core: the exact ``sum (x - zx) * (w - zw) + bias`` over each window, as
    [N, OH, OW, OC] (channels last; int32, or float32 where that holds every sum exactly). A
    filter and bias bound at initialization (OWNED_BY_DML) are prepared once per engine and kept
    in ``cache``."""
    x = read4d(tensors, desc, "InputTensor")
    zero_point = scalar(tensors, desc, "InputZeroPointTensor")
    bias = None if desc.BiasTensor is None else channels_last(tensors, desc, "BiasTensor")
    constant = bool(desc.FilterTensor.Flags & DML_TENSOR_FLAGS.OWNED_BY_DML)
    # the product adds a bias bound at initialization itself (not to grouped convolutions')
    in_product = bias is not None and bool(desc.BiasTensor.Flags & DML_TENSOR_FLAGS.OWNED_BY_DML) and desc.GroupCount == 1
    prepared = constant and (bias is None or in_product)
    key = ("filter", engine.name)
    if prepared and key in cache:
        product, b = cache[key], None
    else:
        b, b_zero_point = filter_matrix(desc, tensors)
        b = np.ascontiguousarray(b)
        product = engine.product(b, b_zero_point, constant, bias if in_product else None)
        if prepared:
            cache[key] = product
    columns = im2col(x.transpose(0, 2, 3, 1), desc, tuple(desc.FilterTensor.Sizes[-2:]), np.array(zero_point).astype(x.dtype))
    acc = product(columns, int(zero_point)) if constant else product(columns, int(zero_point), b)
    if desc.GroupCount > 1:
        acc = acc.transpose(1, 0, 2).reshape(acc.shape[1], -1)
    if bias is not None and not in_product:
        acc = acc + bias
    batch, out_h, out_w = x.shape[0], *desc.OutputTensor.Sizes[-2:]
    return acc.reshape(batch, out_h, out_w, -1)


def quantized_linear_convolution(desc, tensors: dict, arithmetic, engine, cache: dict) -> np.ndarray:
    """Run the convolution desc on raw input buffers (a dict keyed by the desc's field names)."""
    acc = convolution_accumulator(desc, tensors, engine, cache)
    if arithmetic.saturates_u8s8(desc.InputTensor, desc.FilterTensor):
        x = read4d(tensors, desc, "InputTensor")
        acc = acc + u8s8.convolution_correction(desc, x, tensors, scalar(tensors, desc, "InputZeroPointTensor"))
    result = quantize.requantize_product(
        acc,
        scalar(tensors, desc, "InputScaleTensor"),
        channels_last(tensors, desc, "FilterScaleTensor"),
        scalar(tensors, desc, "OutputScaleTensor"),
        scalar(tensors, desc, "OutputZeroPointTensor"),
        desc.OutputTensor.DataType.numpy(),
        arithmetic,
    )
    return result.transpose(0, 3, 1, 2)


def channels_last(tensors: dict, desc, field: str) -> np.ndarray:
    """A per-tensor or per-output-channel parameter ({1, OC, 1, 1}) as [OC], which broadcasts
    along the channels-last accumulator."""
    return read4d(tensors, desc, field).reshape(-1)
