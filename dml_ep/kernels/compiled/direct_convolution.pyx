"""Grouped convolutions with few input channels per group (depthwise ones above all) as direct
loops over the windows, channels last: no im2col, whose rows would be as long as the window and
whose GEMMs, one per group, as narrow as the group (``PreparedConvolution``'s im2col and GEMM is
the numpy twin; both give the exact integer sums).

``out[n, oh, ow, oc] = bias[oc] + sum over the window and the group's input channels of
(x - x_zero_point) * filter``, the filter centred on its zero points beforehand, as int16
[KH, KW, channels per group, OC] (centred 8-bit codes fit): int16 x int16 products widened to
int32 vectorize on any x86-64 (pmullw, pmulhw), where int32 multiplies need SSE4.1. Padding reads
as the input zero point, so it adds nothing and is skipped.

The loops fill one output row (OW x OC sums) at a time: :func:`convolve` writes the sums,
:func:`convolve_requantized` requantizes each row while it is in cache (MLAS's step,
``requantize_row.pxi``) and writes codes.
"""

from libc.stdint cimport int8_t, int16_t, int32_t, uint8_t
from libc.stdlib cimport calloc, free, malloc

include "requantize_row.pxi"

ctypedef fused code:
    uint8_t
    int8_t


def convolve(const code[:, :, :, ::1] x, int x_zero_point, const int16_t[:, :, :, ::1] centred_filter, const int32_t[::1] bias,
             int32_t[:, :, :, ::1] out, Py_ssize_t stride_h, Py_ssize_t stride_w, Py_ssize_t dilation_h, Py_ssize_t dilation_w,
             Py_ssize_t pad_top, Py_ssize_t pad_left):
    """The exact sums of a grouped convolution, [N, OH, OW, OC], from an NHWC input."""
    cdef Window window = _window(x, centred_filter, out.shape[1], out.shape[2], out.shape[3], stride_h, stride_w, dilation_h,
                                 dilation_w, pad_top, pad_left)
    cdef Py_ssize_t n, oh
    if window.offsets == NULL:
        raise MemoryError()
    with nogil:
        for n in range(out.shape[0]):
            for oh in range(out.shape[1]):
                _row(x, x_zero_point, centred_filter, bias, &window, n, oh, &out[n, oh, 0, 0])
    free(window.offsets)


def convolve_requantized(const code[:, :, :, ::1] x, int x_zero_point, const int16_t[:, :, :, ::1] centred_filter,
                         const int32_t[::1] bias, const float[::1] multiplier, const float[::1] low, const float[::1] high,
                         const uint8_t[::1] zero_byte, uint8_t[:, :, ::1] out, Py_ssize_t out_w, Py_ssize_t stride_h,
                         Py_ssize_t stride_w, Py_ssize_t dilation_h, Py_ssize_t dilation_w, Py_ssize_t pad_top, Py_ssize_t pad_left):
    """:func:`convolve`, then MLAS's requantize step (as ``requantize.mlas``, the bias already in
    the sums) on each output row: codes as bytes, [N, OH, OW * OC]; the other parameters are
    given per element of a row (OW * OC, a channel's repeated)."""
    cdef Py_ssize_t width = out.shape[2], n, oh
    if width == 0:
        return
    cdef Window window = _window(x, centred_filter, out.shape[1], out_w, width // out_w, stride_h, stride_w, dilation_h,
                                 dilation_w, pad_top, pad_left)
    cdef int32_t* sums = <int32_t*>malloc(width * sizeof(int32_t))
    cdef int32_t* zeros = <int32_t*>calloc(width, sizeof(int32_t))
    try:
        if window.offsets == NULL or sums == NULL or zeros == NULL:
            raise MemoryError()
        with nogil:
            for n in range(out.shape[0]):
                for oh in range(out.shape[1]):
                    _row(x, x_zero_point, centred_filter, bias, &window, n, oh, sums)
                    _codes(sums, zeros, &multiplier[0], &low[0], &high[0], &zero_byte[0], &out[n, oh, 0], width)
    finally:
        free(window.offsets)
        free(sums)
        free(zeros)


cdef struct Window:
    Py_ssize_t out_w, channels_out, per_group, outputs_per_group
    Py_ssize_t stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left
    Py_ssize_t depthwise  # the first channels summed LANES at a time (a multiple of LANES; 0 unless depthwise)
    Py_ssize_t* offsets  # each tap's offset in the input from the window's first pixel, in codes (malloc'd)


cdef Window _window(const code[:, :, :, ::1] x, const int16_t[:, :, :, ::1] centred_filter, Py_ssize_t out_h, Py_ssize_t out_w,
                    Py_ssize_t channels_out, Py_ssize_t stride_h, Py_ssize_t stride_w, Py_ssize_t dilation_h,
                    Py_ssize_t dilation_w, Py_ssize_t pad_top, Py_ssize_t pad_left):
    """What every row's loops read, worked out once per call."""
    cdef Window window
    cdef Py_ssize_t kernel_h = centred_filter.shape[0], kernel_w = centred_filter.shape[1], kh, kw
    window.out_w, window.channels_out, window.per_group = out_w, channels_out, centred_filter.shape[2]
    window.outputs_per_group = channels_out * window.per_group // x.shape[3]
    window.stride_h, window.stride_w, window.dilation_h, window.dilation_w = stride_h, stride_w, dilation_h, dilation_w
    window.pad_top, window.pad_left = pad_top, pad_left
    window.depthwise = channels_out - channels_out % LANES if window.per_group == 1 and window.outputs_per_group == 1 else 0
    window.offsets = <Py_ssize_t*>malloc(kernel_h * kernel_w * sizeof(Py_ssize_t))
    if window.offsets != NULL:
        for kh in range(kernel_h):
            for kw in range(kernel_w):
                window.offsets[kh * kernel_w + kw] = (kh * dilation_h * x.shape[2] + kw * dilation_w) * x.shape[3]
    return window


cdef void _row(const code[:, :, :, ::1] x, int x_zero_point, const int16_t[:, :, :, ::1] centred_filter, const int32_t[::1] bias,
               const Window* window, Py_ssize_t n, Py_ssize_t oh, int32_t* row) noexcept nogil:
    """Output row ``oh`` of image ``n``, [OW, OC]: a depthwise convolution's channels LANES at a
    time (:func:`_depthwise`), the other groups (and the last channels) one by one
    (:func:`_groups`)."""
    cdef Py_ssize_t kernel_h = centred_filter.shape[0], kernel_w = centred_filter.shape[1], ow, kh0, kh1, kw0, kw1
    cdef Py_ssize_t ih = oh * window.stride_h - window.pad_top, iw
    _taps(oh, window.stride_h, window.pad_top, window.dilation_h, kernel_h, x.shape[1], &kh0, &kh1)
    for ow in range(window.out_w):
        iw = ow * window.stride_w - window.pad_left
        _taps(ow, window.stride_w, window.pad_left, window.dilation_w, kernel_w, x.shape[2], &kw0, &kw1)
        if window.depthwise:
            if kh0 == 0 and kw0 == 0 and kh1 == kernel_h and kw1 == kernel_w:
                _depthwise_inside(&x[n, ih, iw, 0], x_zero_point, &centred_filter[0, 0, 0, 0], &bias[0], window, kernel_h * kernel_w,
                                  row + ow * window.channels_out)
            else:
                _depthwise(x, x_zero_point, centred_filter, bias, window, n, ih, iw, kh0, kh1, kw0, kw1, row + ow * window.channels_out)
        if window.depthwise < window.channels_out:
            _groups(x, x_zero_point, centred_filter, bias, window, n, ih, iw, kh0, kh1, kw0, kw1, row + ow * window.channels_out)


cdef enum:
    LANES = 16  # output channels summed in registers at a time (measured: 32 does not vectorize, 7x slower)


cdef void _depthwise_inside(const code* origin, int x_zero_point, const int16_t* first_weights, const int32_t* bias, const Window* window,
                            Py_ssize_t taps, int32_t* acc) noexcept nogil:
    """:func:`_depthwise` for a window wholly inside the input (``origin``: its first pixel): the
    taps as one loop over their offsets."""
    cdef Py_ssize_t depth = window.channels_out, k, block, lane, t
    cdef int32_t sums[LANES]
    cdef const code* pixel
    cdef const int16_t* weights
    cdef int16_t zero_point = <int16_t>x_zero_point
    for k in range(window.depthwise // LANES):
        block = k * LANES
        for lane in range(LANES):
            sums[lane] = bias[block + lane]
        for t in range(taps):
            pixel = origin + window.offsets[t] + block
            weights = first_weights + t * depth + block
            for lane in range(LANES):
                sums[lane] += <int32_t>(<int16_t>pixel[lane] - zero_point) * weights[lane]
        for lane in range(LANES):
            acc[block + lane] = sums[lane]


cdef void _depthwise(const code[:, :, :, ::1] x, int x_zero_point, const int16_t[:, :, :, ::1] centred_filter,
                     const int32_t[::1] bias, const Window* window, Py_ssize_t n, Py_ssize_t ih, Py_ssize_t iw, Py_ssize_t kh0,
                     Py_ssize_t kh1, Py_ssize_t kw0, Py_ssize_t kw1, int32_t* acc) noexcept nogil:
    """Depthwise (input channel = output channel), the first ``window.depthwise`` channels, of the
    output pixel whose window starts at input ``(ih, iw)`` and reads taps ``[kh0, kh1) x [kw0,
    kw1)``: its channels in blocks of LANES, each block summed over the window in registers
    before it is stored once."""
    cdef Py_ssize_t kh, kw, k, block, lane
    cdef int32_t sums[LANES]
    cdef const code* pixel
    cdef const int16_t* weights
    for k in range(window.depthwise // LANES):
        block = k * LANES
        for lane in range(LANES):
            sums[lane] = bias[block + lane]
        for kh in range(kh0, kh1):
            for kw in range(kw0, kw1):
                pixel = &x[n, ih + kh * window.dilation_h, iw + kw * window.dilation_w, block]
                weights = &centred_filter[kh, kw, 0, block]
                for lane in range(LANES):
                    sums[lane] += <int32_t>(<int16_t>(pixel[lane] - x_zero_point)) * weights[lane]
        for lane in range(LANES):
            acc[block + lane] = sums[lane]


cdef void _groups(const code[:, :, :, ::1] x, int x_zero_point, const int16_t[:, :, :, ::1] centred_filter, const int32_t[::1] bias,
                  const Window* window, Py_ssize_t n, Py_ssize_t ih, Py_ssize_t iw, Py_ssize_t kh0, Py_ssize_t kh1, Py_ssize_t kw0,
                  Py_ssize_t kw1, int32_t* acc) noexcept nogil:
    """The output channels from ``window.depthwise`` on of one output pixel (as :func:`_depthwise`
    takes it): for each tap and input channel of a group, its centred code times the weights of
    the group's outputs."""
    cdef Py_ssize_t per_group = window.per_group, outputs_per_group = window.outputs_per_group
    cdef Py_ssize_t first_group = window.depthwise // outputs_per_group, groups = window.channels_out // outputs_per_group
    cdef Py_ssize_t kh, kw, ic, g, j
    cdef const code* pixel
    cdef const int16_t* weights
    cdef int16_t centred
    for j in range(window.depthwise, window.channels_out):
        acc[j] = bias[j]
    for kh in range(kh0, kh1):
        for kw in range(kw0, kw1):
            pixel = &x[n, ih + kh * window.dilation_h, iw + kw * window.dilation_w, 0]
            for ic in range(per_group):
                weights = &centred_filter[kh, kw, ic, 0]
                for g in range(first_group, groups):
                    centred = <int16_t>(pixel[g * per_group + ic] - x_zero_point)
                    for j in range(g * outputs_per_group, (g + 1) * outputs_per_group):
                        acc[j] += <int32_t>centred * weights[j]


cdef inline void _taps(Py_ssize_t o, Py_ssize_t stride, Py_ssize_t pad, Py_ssize_t dilation, Py_ssize_t kernel, Py_ssize_t size,
                       Py_ssize_t* first, Py_ssize_t* last) noexcept nogil:
    """The taps ``[first, last)`` of output ``o``'s window that read inside the input
    (``o * stride - pad + k * dilation`` in ``[0, size)``): padding adds nothing."""
    cdef Py_ssize_t start = o * stride - pad
    first[0] = 0 if start >= 0 else (dilation - 1 - start) // dilation
    last[0] = 0 if size - 1 - start < 0 else min(kernel, (size - 1 - start) // dilation + 1)
    if last[0] < first[0]:
        last[0] = first[0]
