# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Grouped convolutions with few input channels per group (depthwise ones above all) as direct
loops over the windows, channels last: no im2col, whose rows would be as long as the window and
whose GEMMs, one per group, as narrow as the group (``PreparedConvolution``'s im2col and GEMM is
the numpy twin; both give the exact integer sums).

``out[n, oh, ow, oc] = bias[oc] + sum over the window and the group's input channels of
(x - x_zero_point) * filter``, the filter centred on its zero points beforehand, as int16
[KH, KW, channels per group, OC] (centred 8-bit codes fit): int16 x int16 products widened to
int32 vectorize on any x86-64 (pmullw, pmulhw), where int32 multiplies need SSE4.1. Padding reads
as the input zero point, so it adds nothing and is skipped.
"""

from libc.stdint cimport int8_t, int16_t, int32_t, uint8_t

ctypedef fused code:
    uint8_t
    int8_t


def convolve(const code[:, :, :, ::1] x, int x_zero_point, const int16_t[:, :, :, ::1] centred_filter, const int32_t[::1] bias,
             int32_t[:, :, :, ::1] out, Py_ssize_t stride_h, Py_ssize_t stride_w, Py_ssize_t dilation_h, Py_ssize_t dilation_w,
             Py_ssize_t pad_top, Py_ssize_t pad_left):
    """The exact sums of a grouped convolution, [N, OH, OW, OC], from an NHWC input."""
    cdef Py_ssize_t batch = out.shape[0], out_h = out.shape[1], out_w = out.shape[2], channels_out = out.shape[3]
    cdef Py_ssize_t height = x.shape[1], width = x.shape[2]
    cdef Py_ssize_t kernel_h = centred_filter.shape[0], kernel_w = centred_filter.shape[1], per_group = centred_filter.shape[2]
    cdef Py_ssize_t outputs_per_group = channels_out * per_group // x.shape[3]
    cdef Py_ssize_t groups = channels_out // outputs_per_group
    cdef Py_ssize_t n, oh, ow, kh, kw, ih, iw, ic, oc, g, j
    cdef int32_t* acc
    cdef const code* pixel
    cdef const int16_t* weights
    cdef int16_t centred
    if per_group == 1 and outputs_per_group == 1:
        _depthwise(x, x_zero_point, centred_filter, bias, out, stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left)
        return
    with nogil:
        for n in range(batch):
            for oh in range(out_h):
                for ow in range(out_w):
                    acc = &out[n, oh, ow, 0]
                    for oc in range(channels_out):
                        acc[oc] = bias[oc]
                    for kh in range(kernel_h):
                        ih = oh * stride_h - pad_top + kh * dilation_h
                        if ih < 0 or ih >= height:
                            continue
                        for kw in range(kernel_w):
                            iw = ow * stride_w - pad_left + kw * dilation_w
                            if iw < 0 or iw >= width:
                                continue
                            pixel = &x[n, ih, iw, 0]
                            for ic in range(per_group):
                                weights = &centred_filter[kh, kw, ic, 0]
                                for g in range(groups):
                                    centred = <int16_t>(pixel[g * per_group + ic] - x_zero_point)
                                    for j in range(g * outputs_per_group, (g + 1) * outputs_per_group):
                                        acc[j] += <int32_t>centred * weights[j]


cdef enum:
    LANES = 16  # output channels summed in registers at a time


cdef void _depthwise(const code[:, :, :, ::1] x, int x_zero_point, const int16_t[:, :, :, ::1] centred_filter,
                     const int32_t[::1] bias, int32_t[:, :, :, ::1] out, Py_ssize_t stride_h, Py_ssize_t stride_w,
                     Py_ssize_t dilation_h, Py_ssize_t dilation_w, Py_ssize_t pad_top, Py_ssize_t pad_left) noexcept:
    """Depthwise (input channel = output channel): each output pixel's channels in blocks of
    LANES, each block summed over the whole window in registers before it is stored once."""
    cdef Py_ssize_t batch = out.shape[0], out_h = out.shape[1], out_w = out.shape[2], channels = out.shape[3]
    cdef Py_ssize_t height = x.shape[1], width = x.shape[2]
    cdef Py_ssize_t kernel_h = centred_filter.shape[0], kernel_w = centred_filter.shape[1]
    cdef Py_ssize_t n, oh, ow, kh, kw, ih, iw, block, lane
    cdef Py_ssize_t blocks = channels // LANES, end = blocks * LANES, k
    cdef int32_t sums[LANES]
    cdef int32_t* acc
    cdef const code* pixel
    cdef const int16_t* weights
    with nogil:
        for n in range(batch):
            for oh in range(out_h):
                for ow in range(out_w):
                    acc = &out[n, oh, ow, 0]
                    for k in range(blocks):
                        block = k * LANES
                        for lane in range(LANES):
                            sums[lane] = bias[block + lane]
                        for kh in range(kernel_h):
                            ih = oh * stride_h - pad_top + kh * dilation_h
                            if ih < 0 or ih >= height:
                                continue
                            for kw in range(kernel_w):
                                iw = ow * stride_w - pad_left + kw * dilation_w
                                if iw < 0 or iw >= width:
                                    continue
                                pixel = &x[n, ih, iw, block]
                                weights = &centred_filter[kh, kw, 0, block]
                                for lane in range(LANES):
                                    sums[lane] += <int32_t>(<int16_t>(pixel[lane] - x_zero_point)) * weights[lane]
                        for lane in range(LANES):
                            acc[block + lane] = sums[lane]
                    for block in range(end, channels):  # the last channels, one by one
                        acc[block] = bias[block]
                        for kh in range(kernel_h):
                            ih = oh * stride_h - pad_top + kh * dilation_h
                            if ih < 0 or ih >= height:
                                continue
                            for kw in range(kernel_w):
                                iw = ow * stride_w - pad_left + kw * dilation_w
                                if 0 <= iw < width:
                                    acc[block] += <int32_t>(<int16_t>(x[n, ih, iw, block] - x_zero_point)) * centred_filter[kh, kw, 0, block]
