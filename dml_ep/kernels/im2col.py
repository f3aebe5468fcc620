"""im2col for the quantized convolution: input codes in NHWC order as GEMM rows.

A window view of the input (padded with its zero point: one copy; none for an unpadded 1x1
convolution with unit strides) reshaped to [N*OH*OW, KH*KW*C], K ordered (kernel row, kernel
column, input channel) as MLAS's NHWC im2col orders it. Compiled (``kernels.compiled.im2col``),
the windows are copied into their rows in one pass, padding included.
"""

from __future__ import annotations

import numpy as np

from . import compiled as native


def im2col(x_nhwc: np.ndarray, desc, kernel: tuple[int, int], pad_code, compiled: bool = False) -> np.ndarray:
    """Input codes [N, H, W, C] as GEMM rows [N*OH*OW, KH*KW*C] (or [G, N*OH*OW, KH*KW*C/G]);
    padding reads as ``pad_code``, the input zero point. One copy (two with padding, one
    ``compiled``); none for an unpadded 1x1 convolution with unit strides on a channels-last input."""
    (pad_top, pad_left), (pad_bottom, pad_right) = desc.StartPadding, desc.EndPadding
    (stride_h, stride_w), (dilation_h, dilation_w) = desc.Strides, desc.Dilations
    batch, height, width, channels = x_nhwc.shape
    if kernel == (1, 1) and not any(desc.StartPadding + desc.EndPadding):
        columns = x_nhwc[:, ::stride_h, ::stride_w].reshape(-1, channels)
    elif compiled and native.im2col is not None:
        out_h, out_w = desc.OutputTensor.Sizes[-2:]
        columns = np.empty((batch * out_h * out_w, kernel[0] * kernel[1] * channels), x_nhwc.dtype)
        native.im2col.im2col(x_nhwc.view(np.uint8), int(np.asarray(pad_code).view(np.uint8)), *kernel,
                             stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left, out_h, out_w, columns.view(np.uint8))
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
