"""im2col for the quantized convolution: input codes in NHWC order as GEMM rows.

A window view of the input (none for an unpadded 1x1 convolution with unit strides; with
padding, the windows gathered by index from the input bordered by one row and column of its zero
point) reshaped to [N*OH*OW, KH*KW*C], K ordered (kernel row, kernel
column, input channel) as MLAS's NHWC im2col orders it. Compiled (``kernels.compiled.im2col``),
the windows are copied into their rows in one pass, padding included.
"""

from __future__ import annotations

import numpy as np

from . import compiled as native


def im2col(x_nhwc: np.ndarray, desc, kernel: tuple[int, int], pad_code, compiled: bool = False) -> np.ndarray:
    """Input codes [N, H, W, C] as GEMM rows [N*OH*OW, KH*KW*C] (or [G, N*OH*OW, KH*KW*C/G]);
    padding reads as ``pad_code``, the input zero point. One copy (and the input's, bordered, with
    padding); none for an unpadded 1x1 convolution with unit strides on a channels-last input."""
    pad_top, pad_left = desc.StartPadding
    (stride_h, stride_w), (dilation_h, dilation_w) = desc.Strides, desc.Dilations
    batch, height, width, channels = x_nhwc.shape
    if kernel == (1, 1) and not any(desc.StartPadding + desc.EndPadding):
        columns = x_nhwc[:, ::stride_h, ::stride_w].reshape(-1, channels)
    elif compiled and native.im2col is not None:
        out_h, out_w = desc.OutputTensor.Sizes[-2:]
        columns = np.empty((batch * out_h * out_w, kernel[0] * kernel[1] * channels), x_nhwc.dtype)
        native.im2col.im2col(x_nhwc.view(np.uint8), int(np.asarray(pad_code).view(np.uint8)), *kernel,
                             stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left, out_h, out_w, columns.view(np.uint8))
    elif any(desc.StartPadding + desc.EndPadding):
        columns = _padded_windows(x_nhwc, desc, kernel, pad_code)
    else:
        x = np.ascontiguousarray(x_nhwc)
        n_step, h_step, w_step, c_step = x.strides
        out_h = (height - (kernel[0] - 1) * dilation_h - 1) // stride_h + 1
        out_w = (width - (kernel[1] - 1) * dilation_w - 1) // stride_w + 1
        windows = np.ndarray((batch, out_h, out_w, *kernel, channels), x.dtype, x,  # N OH OW KH KW C
                             strides=(n_step, h_step * stride_h, w_step * stride_w, h_step * dilation_h, w_step * dilation_w, c_step))
        columns = windows.reshape(-1, kernel[0] * kernel[1] * channels)
    if desc.GroupCount == 1:
        return columns
    rows = columns.shape[0]
    return columns.reshape(rows, kernel[0] * kernel[1], desc.GroupCount, -1).transpose(2, 0, 1, 3).reshape(desc.GroupCount, rows, -1)


def _padded_windows(x_nhwc: np.ndarray, desc, kernel: tuple[int, int], pad_code) -> np.ndarray:
    """The rows of a padded convolution gathered from the input with one padding row and column
    appended, which every window position in the padding reads: the padded input itself is never
    made (pads of 2^30 with strides of 2^31 - 1 are valid, and read a handful of elements)."""
    batch, height, width, channels = x_nhwc.shape
    bordered = np.empty((batch, height + 1, width + 1, channels), x_nhwc.dtype)
    bordered[...] = pad_code
    bordered[:, :height, :width] = x_nhwc
    out_h, out_w = desc.OutputTensor.Sizes[-2:]
    rows = _reads(out_h, kernel[0], desc.Strides[0], desc.Dilations[0], desc.StartPadding[0], height)
    cols = _reads(out_w, kernel[1], desc.Strides[1], desc.Dilations[1], desc.StartPadding[1], width)
    windows = bordered[:, rows[:, None, :, None], cols[None, :, None, :]]  # N OH OW KH KW C
    return windows.reshape(-1, kernel[0] * kernel[1] * channels)


def _reads(outputs: int, taps: int, stride: int, dilation: int, start: int, size: int) -> np.ndarray:
    """[outputs, taps]: the input index each window position reads along one axis; ``size`` (the
    appended padding) where it reads the padding."""
    index = np.arange(outputs, dtype=np.int64)[:, None] * stride + np.arange(taps, dtype=np.int64) * dilation - start
    return np.where((index >= 0) & (index < size), index, size)
