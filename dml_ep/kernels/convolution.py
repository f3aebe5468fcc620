"""DML_OPERATOR_QUANTIZED_LINEAR_CONVOLUTION.

DirectML: ``Output = Quantize(Convolve(Dequantize(Input), Dequantize(Filter)) + Bias * InputScale *
FilterScale, OutputScale, OutputZeroPoint)``; since the bias is int32 in units of
``InputScale * FilterScale``, this is ``round((acc + Bias) * InputScale * FilterScale / OutputScale)``
with ``acc = sum((x - zx) * (w - zw))`` over the window, padding reading as the input zero point.

The accumulator is exact: im2col of the input codes (shifted by 128 for uint8, a strided view of
the input padded with its zero point, one copy; none for 1x1 convolutions) times the centred
filter, one batched float32 GEMM per K-block (see ``integer_gemm``; usually one), all groups at
once (depthwise included); ``(offset - zx) * sum(w - zw) + bias`` is then one per-channel constant. Then the output step of the session's arithmetic:
``"directml"`` rounds the ideal value correctly; ``"onnxruntime"`` follows MLAS,
``float32(acc + bias) * float32(float32(InputScale * FilterScale) / OutputScale)``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..enums import DML_TENSOR_FLAGS
from . import quantize, u8s8
from .parameters import parameter4d, read4d, scalar
from .integer_gemm import FLOAT32_EXACT, exact_matmul, weight_blocks


@dataclasses.dataclass(frozen=True)
class PreparedFilter:
    """The filter as the GEMM needs it: centred, grouped, with its column sums and exact K-blocks."""

    weights: np.ndarray  # [G, OC/G, C/G*KH*KW] float32, filter minus its zero point
    column_sums: np.ndarray  # [1, OC, 1, 1] float64: sum over K of the centred filter
    blocks: list  # K-blocks exact in float32 against input codes shifted into [-128, 127]
    bound: float  # the largest |partial sum| any block can reach


def prepare_filter(desc, tensors) -> PreparedFilter:
    w = read4d(tensors, desc, "FilterTensor").astype(np.float32)
    if desc.FilterZeroPointTensor is not None:
        w -= parameter4d(tensors, desc, "FilterZeroPointTensor").reshape(-1, 1, 1, 1)
    weights = np.ascontiguousarray(w.reshape(desc.GroupCount, w.shape[0] // desc.GroupCount, -1))
    max_abs_x = 128  # input codes enter the GEMM shifted by code_offset()
    blocks = weight_blocks(weights, max_abs_x)
    magnitudes = np.abs(weights).astype(np.float64)
    bound = max(float(magnitudes[..., block].sum(axis=-1).max(initial=0.0)) * max_abs_x for block in blocks)
    column_sums = weights.sum(axis=-1, dtype=np.float64).reshape(1, -1, 1, 1)
    return PreparedFilter(weights, column_sums, blocks, bound)


def code_offset(dtype) -> int:
    """What is subtracted from input codes before the GEMM: 128 puts uint8 codes in [-128, 127] like
    int8's, which halves the worst-case partial sums and so doubles the exact K-block length."""
    return 128 if np.dtype(dtype) == np.uint8 else 0


def im2col(x: np.ndarray, desc, kernel: tuple[int, int], pad_value: float, offset: int) -> tuple[np.ndarray, tuple[int, int]]:
    """Input codes [N, C, H, W] minus ``offset`` as float32 columns [N, G, C/G*KH*KW, OH*OW] (one
    copy; none for 1x1 convolutions), and (OH, OW). Padding reads as the input zero point, a real 0.
    """
    (pad_top, pad_left), (pad_bottom, pad_right) = desc.StartPadding, desc.EndPadding
    (stride_h, stride_w), (dilation_h, dilation_w) = desc.Strides, desc.Dilations
    batch, channels, height, width = x.shape
    if kernel == (1, 1) and desc.Strides == (1, 1) and not any(desc.StartPadding + desc.EndPadding):
        shifted = np.subtract(x, offset, dtype=np.float32)
        return shifted.reshape(batch, desc.GroupCount, -1, height * width), (height, width)
    padded = np.full((batch, channels, height + pad_top + pad_bottom, width + pad_left + pad_right), pad_value - offset, np.float32)
    np.subtract(x, offset, out=padded[:, :, pad_top : pad_top + height, pad_left : pad_left + width], dtype=np.float32)
    span = ((kernel[0] - 1) * dilation_h + 1, (kernel[1] - 1) * dilation_w + 1)
    windows = sliding_window_view(padded, span, axis=(2, 3))[:, :, ::stride_h, ::stride_w, ::dilation_h, ::dilation_w]
    out_h, out_w = windows.shape[2:4]
    columns = windows.transpose(0, 1, 4, 5, 2, 3)  # N, C, KH, KW, OH, OW
    return columns.reshape(batch, desc.GroupCount, -1, out_h * out_w), (out_h, out_w)


def accumulate(desc, tensors: dict, cache: dict):
    """The exact ``sum (x - zx) * (w - zw) + bias`` as [N, OC, OH, OW] (float32 when exact in it, else float64).

    The GEMM runs on the input codes minus an offset; ``(offset - zx) * column_sums + bias`` is one
    per-channel constant.
    Filters bound at initialization (OWNED_BY_DML) are prepared once and kept in ``cache``.
    Also returns the input (4-D) and its zero point.
    """
    x = read4d(tensors, desc, "InputTensor")
    input_zero_point = scalar(tensors, desc, "InputZeroPointTensor")
    if desc.FilterTensor.Flags & DML_TENSOR_FLAGS.OWNED_BY_DML:
        if "filter" not in cache:
            cache["filter"] = prepare_filter(desc, tensors)
        prepared = cache["filter"]
    else:
        prepared = prepare_filter(desc, tensors)
    offset = code_offset(x.dtype)
    columns, (out_h, out_w) = im2col(x, desc, tuple(desc.FilterTensor.Sizes[-2:]), input_zero_point, offset)
    acc = exact_matmul(prepared.weights, columns, prepared.blocks).reshape(x.shape[0], -1, out_h, out_w)
    constant = (offset - input_zero_point) * prepared.column_sums
    if desc.BiasTensor is not None:
        constant = constant + parameter4d(tensors, desc, "BiasTensor")
    if acc.dtype == np.float32 and prepared.bound + np.abs(constant).max() <= FLOAT32_EXACT:
        acc += constant.astype(np.float32)
    else:
        acc = acc.astype(np.float64) + constant
    return acc, x, input_zero_point


def quantized_linear_convolution(desc, tensors: dict, options, cache: dict) -> np.ndarray:
    """Run the convolution desc on raw input buffers (a dict keyed by the desc's field names)."""
    acc, x, input_zero_point = accumulate(desc, tensors, cache)
    if options.saturates_u8s8(desc.InputTensor, desc.FilterTensor):
        acc = acc + u8s8.convolution_correction(desc, x, tensors, input_zero_point)

    result = quantize.requantize_product(
        acc,
        scalar(tensors, desc, "InputScaleTensor"),
        parameter4d(tensors, desc, "FilterScaleTensor"),
        scalar(tensors, desc, "OutputScaleTensor"),
        scalar(tensors, desc, "OutputZeroPointTensor"),
        desc.OutputTensor.DataType.numpy(),
        options,
    )
    return result.reshape(desc.OutputTensor.Sizes)
