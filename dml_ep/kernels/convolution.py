"""DML_OPERATOR_QUANTIZED_LINEAR_CONVOLUTION.

DirectML: ``Output = Quantize(Convolve(Dequantize(Input), Dequantize(Filter)) + Bias * InputScale *
FilterScale, OutputScale, OutputZeroPoint)``; since the bias is int32 in units of
``InputScale * FilterScale``, this is ``round((acc + Bias) * InputScale * FilterScale / OutputScale)``
with ``acc = sum((x - zx) * (w - zw))`` over the window, padding reading as the input zero point.

The integer core computes ``acc`` exactly, channels last: im2col of the input codes in NHWC order
(a window view of the input padded with its zero point, one copy; none for an unpadded 1x1
convolution with unit strides), times the filter as a [KH*KW*C/G, OC/G] matrix per group, on the
session's integer engine (``dml_ep.engines``). The filter is prepared once per engine. Then the
shared requantize step (``quantize.Requantizer``). The output is written channels last and
returned as an NCHW view of that memory: a DirectML tensor is sizes plus strides, so the next
convolution reads it without a transpose.
"""

from __future__ import annotations

import numpy as np

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
    padding reads as ``pad_code``, the input zero point. One copy (two with padding); none for
    an unpadded 1x1 convolution with unit strides on a channels-last input."""
    (pad_top, pad_left), (pad_bottom, pad_right) = desc.StartPadding, desc.EndPadding
    (stride_h, stride_w), (dilation_h, dilation_w) = desc.Strides, desc.Dilations
    batch, height, width, channels = x_nhwc.shape
    if kernel == (1, 1) and not any(desc.StartPadding + desc.EndPadding):
        columns = x_nhwc[:, ::stride_h, ::stride_w].reshape(-1, channels)
    else:
        if any(desc.StartPadding + desc.EndPadding):
            padded = np.empty((batch, height + pad_top + pad_bottom, width + pad_left + pad_right, channels), x_nhwc.dtype)
            padded[...] = pad_code
            padded[:, pad_top : pad_top + height, pad_left : pad_left + width] = x_nhwc
        else:
            padded = np.ascontiguousarray(x_nhwc)
        n_step, h_step, w_step, c_step = padded.strides
        out_h = (padded.shape[1] - (kernel[0] - 1) * dilation_h - 1) // stride_h + 1
        out_w = (padded.shape[2] - (kernel[1] - 1) * dilation_w - 1) // stride_w + 1
        windows = np.ndarray((batch, out_h, out_w, *kernel, channels), padded.dtype, padded,  # N OH OW KH KW C
                             strides=(n_step, h_step * stride_h, w_step * stride_w, h_step * dilation_h, w_step * dilation_w, c_step))
        columns = windows.reshape(-1, kernel[0] * kernel[1] * channels)
    if desc.GroupCount == 1:
        return columns
    rows = columns.shape[0]
    return columns.reshape(rows, kernel[0] * kernel[1], desc.GroupCount, -1).transpose(2, 0, 1, 3).reshape(desc.GroupCount, rows, -1)


class PreparedConvolution:
    """What one convolution desc needs at each run, worked out once per node, engine and
    arithmetic: its scalar parameters, the filter as the engine's product (with the bias, where
    both are bound at initialization (OWNED_BY_DML)), and the requantize step. The product is
    shared by the node's arithmetics (``products``, the node's cache)."""

    def __init__(self, desc, tensors: dict, arithmetic, engine, products: dict):
        self.desc, self.engine, self.products = desc, engine, products
        self.kernel = tuple(desc.FilterTensor.Sizes[-2:])
        self.rows = int(np.prod(desc.OutputTensor.Sizes)) // desc.OutputTensor.Sizes[1]  # N * OH * OW
        self.zero_point = int(scalar(tensors, desc, "InputZeroPointTensor"))
        self.pad_code = np.array(self.zero_point).astype(desc.InputTensor.DataType.numpy())
        self.constant = bool(desc.FilterTensor.Flags & DML_TENSOR_FLAGS.OWNED_BY_DML)
        bias_constant = desc.BiasTensor is not None and bool(desc.BiasTensor.Flags & DML_TENSOR_FLAGS.OWNED_BY_DML)
        self.bias = channels_last(tensors, desc, "BiasTensor") if bias_constant else None
        self.bias_in_product = self.constant and bias_constant and desc.GroupCount == 1
        if self.constant:
            self._product(tensors)
        self.saturates_u8s8 = arithmetic.saturates_u8s8(desc.InputTensor, desc.FilterTensor)
        self.requantize = quantize.Requantizer(
            scalar(tensors, desc, "InputScaleTensor"),
            channels_last(tensors, desc, "FilterScaleTensor"),
            scalar(tensors, desc, "OutputScaleTensor"),
            scalar(tensors, desc, "OutputZeroPointTensor"),
            desc.OutputTensor.DataType.numpy(),
            arithmetic,
        )

    def _product(self, tensors: dict):
        """The engine's product for the filter: made once (a filter bound at run time is fed to
        it at each run)."""
        key = ("product", self.engine.name)
        if key not in self.products:
            b, b_zero_point = filter_matrix(self.desc, tensors)
            bias = self.bias if self.bias_in_product else None
            self.products[key] = self.engine.product(np.ascontiguousarray(b), b_zero_point, self.constant, bias, self.rows)
        return self.products[key]

    def columns(self, tensors: dict) -> np.ndarray:
        """This run's input as GEMM rows (:func:`im2col`)."""
        x = read4d(tensors, self.desc, "InputTensor")
        return im2col(x.transpose(0, 2, 3, 1), self.desc, self.kernel, self.pad_code)

    def accumulate(self, tensors: dict, columns: np.ndarray | None = None) -> np.ndarray:
        """The integer core: the exact ``sum (x - zx) * (w - zw) + bias`` over each window, as
        [N, OH, OW, OC] (channels last; int32, or float32 where that holds every sum exactly).
        ``columns``: this run's :meth:`columns`, where the caller has them."""
        desc = self.desc
        columns = self.columns(tensors) if columns is None else columns
        if self.constant:
            acc = self._product(tensors)(columns, self.zero_point)
        else:  # a filter bound at run time
            acc = self._product(tensors)(columns, self.zero_point, np.ascontiguousarray(filter_matrix(desc, tensors)[0]))
        acc = self._channels_last(acc)
        if desc.BiasTensor is not None and not self.bias_in_product:
            acc = acc + (self.bias if self.bias is not None else channels_last(tensors, desc, "BiasTensor"))
        return acc

    def _channels_last(self, products: np.ndarray) -> np.ndarray:
        """GEMM results, [N*OH*OW, OC] or per group [G, N*OH*OW, OC/G], as [N, OH, OW, OC]."""
        if products.ndim == 3:
            products = products.transpose(1, 0, 2).reshape(products.shape[1], -1)
        return products.reshape(-1, *self.desc.OutputTensor.Sizes[-2:], products.shape[-1])

    def __call__(self, tensors: dict) -> np.ndarray:
        columns = self.columns(tensors)
        acc = self.accumulate(tensors, columns)
        filter_sizes = self.desc.FilterTensor.Sizes
        depthwise = filter_sizes[1] == 1 and filter_sizes[0] == self.desc.GroupCount
        if self.saturates_u8s8 and not depthwise:  # MLAS's depthwise kernels are exact
            # the columns are MLAS's NHWC im2col: K is kernel tap outer, input channel inner
            acc = acc + self._channels_last(u8s8.matmul_correction(columns, filter_matrix(self.desc, tensors)[0]))
        return self.requantize(acc).transpose(0, 3, 1, 2)


def channels_last(tensors: dict, desc, field: str) -> np.ndarray:
    """A per-tensor or per-output-channel parameter ({1, OC, 1, 1}) as [OC], which broadcasts
    along the channels-last accumulator."""
    return read4d(tensors, desc, field).reshape(-1)
