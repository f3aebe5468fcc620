"""DML_OPERATOR_QUANTIZED_LINEAR_CONVOLUTION.

DirectML: ``Output = Quantize(Convolve(Dequantize(Input), Dequantize(Filter)) + Bias * InputScale *
FilterScale, OutputScale, OutputZeroPoint)``; since the bias is int32 in units of
``InputScale * FilterScale``, this is ``round((acc + Bias) * InputScale * FilterScale / OutputScale)``
with ``acc = sum((x - zx) * (w - zw))`` over the window, padding reading as the input zero point.

The accumulator is exact: im2col (a strided view of the zero-point-centred, zero-padded input, one
copy) times the centred filter, one batched float32 GEMM per K-block (see ``integer_gemm``), all
groups at once (depthwise included). Then the output step of the session's arithmetic:
``"directml"`` rounds the ideal value correctly; ``"onnxruntime"`` follows MLAS,
``float32(acc + bias) * float32(float32(InputScale * FilterScale) / OutputScale)``.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..enums import DML_TENSOR_FLAGS
from ..tensor_desc import view
from . import quantize, u8s8
from .integer_gemm import exact_matmul


def _centred_filter(desc, tensors) -> tuple[np.ndarray, float]:
    """The filter minus its zero point as [G, OC/G, C/G*KH*KW] float32, and its largest magnitude."""
    w = _as4d(view(tensors["FilterTensor"], desc.FilterTensor)).astype(np.float32)
    if desc.FilterZeroPointTensor is not None:
        w -= view(tensors["FilterZeroPointTensor"], desc.FilterZeroPointTensor).reshape(-1, 1, 1, 1)
    centred = np.ascontiguousarray(w.reshape(desc.GroupCount, w.shape[0] // desc.GroupCount, -1))
    return centred, float(np.abs(centred).max(initial=0.0))


def _as4d(array: np.ndarray) -> np.ndarray:
    return array.reshape((1,) * (4 - array.ndim) + array.shape)


def _scalar(tensors, desc, field, default=0.0) -> float:
    tensor_desc = getattr(desc, field)
    if tensor_desc is None:
        return default
    return float(view(tensors[field], tensor_desc).reshape(-1)[0])


def _per_channel(tensors, desc, field, default=0.0) -> np.ndarray:
    """A {1,1,1,1} or {1,OC,1,1} parameter as an array broadcastable to the [N,OC,OH,OW] output."""
    tensor_desc = getattr(desc, field)
    if tensor_desc is None:
        return np.array(default).reshape(1, 1, 1, 1)
    return view(tensors[field], tensor_desc).reshape(1, -1, 1, 1)


def im2col(x: np.ndarray, desc, kernel: tuple[int, int]) -> tuple[np.ndarray, tuple[int, int]]:
    """[N, C, H, W] (already centred) to [N, G, C/G*KH*KW, OH*OW] columns, zero-padded; and (OH, OW)."""
    (pad_top, pad_left), (pad_bottom, pad_right) = desc.StartPadding, desc.EndPadding
    padded = np.pad(x, ((0, 0), (0, 0), (pad_top, pad_bottom), (pad_left, pad_right)))
    (stride_h, stride_w), (dilation_h, dilation_w) = desc.Strides, desc.Dilations
    span = ((kernel[0] - 1) * dilation_h + 1, (kernel[1] - 1) * dilation_w + 1)
    windows = sliding_window_view(padded, span, axis=(2, 3))[:, :, ::stride_h, ::stride_w, ::dilation_h, ::dilation_w]
    batch, _, out_h, out_w = windows.shape[:4]
    columns = windows.transpose(0, 1, 4, 5, 2, 3)  # N, C, KH, KW, OH, OW
    return columns.reshape(batch, desc.GroupCount, -1, out_h * out_w), (out_h, out_w)


def accumulate(desc, tensors: dict, cache: dict) -> tuple[np.ndarray, np.ndarray, float]:
    """The exact integer accumulator [N, OC, OH, OW] (float32 or float64), the input and its zero point.

    Filters bound at initialization (OWNED_BY_DML) are centred once and kept in ``cache``.
    """
    x = _as4d(view(tensors["InputTensor"], desc.InputTensor))
    input_zero_point = _scalar(tensors, desc, "InputZeroPointTensor")
    lo, hi = quantize.quant_range(x.dtype)
    centred_x = x.astype(np.float32)
    if input_zero_point:
        centred_x -= np.float32(input_zero_point)
    if desc.FilterTensor.Flags & DML_TENSOR_FLAGS.OWNED_BY_DML:
        if "filter" not in cache:
            cache["filter"] = _centred_filter(desc, tensors)
        weights, max_abs_w = cache["filter"]
    else:
        weights, max_abs_w = _centred_filter(desc, tensors)
    columns, (out_h, out_w) = im2col(centred_x, desc, tuple(desc.FilterTensor.Sizes[-2:]))
    max_abs_x = max(input_zero_point - lo, hi - input_zero_point)
    acc = exact_matmul(weights, columns, max_abs_x, max_abs_w)
    return acc.reshape(x.shape[0], -1, out_h, out_w), x, input_zero_point


def quantized_linear_convolution(desc, tensors: dict, options, cache: dict) -> np.ndarray:
    """Run the convolution desc on raw input buffers (a dict keyed by the desc's field names)."""
    acc, x, input_zero_point = accumulate(desc, tensors, cache)
    acc = acc.astype(np.float64)
    if options.saturates_u8s8(desc.InputTensor, desc.FilterTensor):
        acc += u8s8.convolution_correction(desc, x, tensors, input_zero_point)
    if desc.BiasTensor is not None:
        acc += _per_channel(tensors, desc, "BiasTensor")

    input_scale = np.float32(_scalar(tensors, desc, "InputScaleTensor"))
    filter_scale = _per_channel(tensors, desc, "FilterScaleTensor").astype(np.float32)
    output_scale = np.float32(_scalar(tensors, desc, "OutputScaleTensor"))
    output_zero_point = _scalar(tensors, desc, "OutputZeroPointTensor")
    out_dtype = desc.OutputTensor.DataType.numpy()
    if options.onnxruntime:
        multiplier = (input_scale * filter_scale) / output_scale
        result = quantize.requantize_onnxruntime(acc, multiplier, output_zero_point, out_dtype)
    else:
        scale_in = np.float64(input_scale) * filter_scale.astype(np.float64)
        result = quantize.requantize_product_exact(acc, scale_in, output_scale, output_zero_point, out_dtype)
    return result.reshape(desc.OutputTensor.Sizes)
