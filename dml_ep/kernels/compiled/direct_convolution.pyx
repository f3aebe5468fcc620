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
    """The exact sums of a grouped convolution, [N, OH, OW, OC], from an NHWC input: a depthwise
    one's channels LANES at a time (:func:`_depthwise`), the other groups (and the last channels)
    one by one (:func:`_groups`)."""
    cdef Py_ssize_t per_group = centred_filter.shape[2], outputs_per_group = out.shape[3] * per_group // x.shape[3]
    cdef Py_ssize_t done = 0
    if per_group == 1 and outputs_per_group == 1:
        done = out.shape[3] - out.shape[3] % LANES
        _depthwise(x, x_zero_point, centred_filter, bias, out, stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left, done)
    if done < out.shape[3]:
        _groups(x, x_zero_point, centred_filter, bias, out, stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left,
                done // outputs_per_group)


cdef void _groups(const code[:, :, :, ::1] x, int x_zero_point, const int16_t[:, :, :, ::1] centred_filter, const int32_t[::1] bias,
                  int32_t[:, :, :, ::1] out, Py_ssize_t stride_h, Py_ssize_t stride_w, Py_ssize_t dilation_h, Py_ssize_t dilation_w,
                  Py_ssize_t pad_top, Py_ssize_t pad_left, Py_ssize_t first_group) noexcept:
    """The groups from ``first_group`` on: for each tap and input channel of the group, its
    centred code times the weights of the group's outputs."""
    cdef Py_ssize_t batch = out.shape[0], out_h = out.shape[1], out_w = out.shape[2], channels_out = out.shape[3]
    cdef Py_ssize_t height = x.shape[1], width = x.shape[2]
    cdef Py_ssize_t kernel_h = centred_filter.shape[0], kernel_w = centred_filter.shape[1], per_group = centred_filter.shape[2]
    cdef Py_ssize_t outputs_per_group = channels_out * per_group // x.shape[3]
    cdef Py_ssize_t groups = channels_out // outputs_per_group
    cdef Py_ssize_t n, oh, ow, kh, kw, kh0, kh1, kw0, kw1, ic, g, j
    cdef int32_t* acc
    cdef const code* pixel
    cdef const int16_t* weights
    cdef int16_t centred
    with nogil:
        for n in range(batch):
            for oh in range(out_h):
                for ow in range(out_w):
                    acc = &out[n, oh, ow, 0]
                    for j in range(first_group * outputs_per_group, channels_out):
                        acc[j] = bias[j]
                    _taps(oh, stride_h, pad_top, dilation_h, kernel_h, height, &kh0, &kh1)
                    _taps(ow, stride_w, pad_left, dilation_w, kernel_w, width, &kw0, &kw1)
                    for kh in range(kh0, kh1):
                        for kw in range(kw0, kw1):
                            pixel = &x[n, oh * stride_h - pad_top + kh * dilation_h, ow * stride_w - pad_left + kw * dilation_w, 0]
                            for ic in range(per_group):
                                weights = &centred_filter[kh, kw, ic, 0]
                                for g in range(first_group, groups):
                                    centred = <int16_t>(pixel[g * per_group + ic] - x_zero_point)
                                    for j in range(g * outputs_per_group, (g + 1) * outputs_per_group):
                                        acc[j] += <int32_t>centred * weights[j]


cdef enum:
    LANES = 16  # output channels summed in registers at a time


cdef void _depthwise(const code[:, :, :, ::1] x, int x_zero_point, const int16_t[:, :, :, ::1] centred_filter,
                     const int32_t[::1] bias, int32_t[:, :, :, ::1] out, Py_ssize_t stride_h, Py_ssize_t stride_w,
                     Py_ssize_t dilation_h, Py_ssize_t dilation_w, Py_ssize_t pad_top, Py_ssize_t pad_left, Py_ssize_t channels) noexcept:
    """Depthwise (input channel = output channel), the first ``channels`` (a multiple of LANES):
    each output pixel's channels in blocks of LANES, each block summed over the whole window in
    registers before it is stored once."""
    cdef Py_ssize_t batch = out.shape[0], out_h = out.shape[1], out_w = out.shape[2]
    cdef Py_ssize_t height = x.shape[1], width = x.shape[2]
    cdef Py_ssize_t kernel_h = centred_filter.shape[0], kernel_w = centred_filter.shape[1]
    cdef Py_ssize_t n, oh, ow, kh, kw, kh0, kh1, kw0, kw1, block, lane, k
    cdef int32_t sums[LANES]
    cdef int32_t* acc
    cdef const code* pixel
    cdef const int16_t* weights
    with nogil:
        for n in range(batch):
            for oh in range(out_h):
                for ow in range(out_w):
                    acc = &out[n, oh, ow, 0]
                    _taps(oh, stride_h, pad_top, dilation_h, kernel_h, height, &kh0, &kh1)
                    _taps(ow, stride_w, pad_left, dilation_w, kernel_w, width, &kw0, &kw1)
                    for k in range(channels // LANES):
                        block = k * LANES
                        for lane in range(LANES):
                            sums[lane] = bias[block + lane]
                        for kh in range(kh0, kh1):
                            for kw in range(kw0, kw1):
                                pixel = &x[n, oh * stride_h - pad_top + kh * dilation_h, ow * stride_w - pad_left + kw * dilation_w, block]
                                weights = &centred_filter[kh, kw, 0, block]
                                for lane in range(LANES):
                                    sums[lane] += <int32_t>(<int16_t>(pixel[lane] - x_zero_point)) * weights[lane]
                        for lane in range(LANES):
                            acc[block + lane] = sums[lane]


cdef inline void _taps(Py_ssize_t o, Py_ssize_t stride, Py_ssize_t pad, Py_ssize_t dilation, Py_ssize_t kernel, Py_ssize_t size,
                       Py_ssize_t* first, Py_ssize_t* last) noexcept nogil:
    """The taps ``[first, last)`` of output ``o``'s window that read inside the input
    (``o * stride - pad + k * dilation`` in ``[0, size)``): padding adds nothing."""
    cdef Py_ssize_t start = o * stride - pad
    first[0] = 0 if start >= 0 else (dilation - 1 - start) // dilation
    last[0] = 0 if size - 1 - start < 0 else min(kernel, (size - 1 - start) // dilation + 1)
    if last[0] < first[0]:
        last[0] = first[0]
