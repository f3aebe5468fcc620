"""Grouped convolutions with few input channels per group (depthwise ones above all) as direct
loops over the windows, channels last: no im2col, whose rows would be as long as the window and
whose GEMMs, one per group, as narrow as the group (``PreparedConvolution``'s im2col and GEMM is
the numpy twin; both give the exact integer sums).

``out[n, oh, ow, oc] = bias[oc] + sum over the window and the group's input channels of
(x - x_zero_point) * filter``, the filter centred on its zero points beforehand, as int16
[KH, KW, channels per group, OC] (centred 8-bit codes fit): int16 x int16 products widened to
int32 vectorize on any x86-64 (pmullw, pmulhw), where int32 multiplies need SSE4.1. Padding reads
as the input zero point, so it adds nothing and is skipped. A depthwise window wholly inside the
input sums the raw codes instead, the zero point folded into its start, one pmaddwd per tap where
the build has AVX2 or AVX-512 (``depthwise_taps.h``; measured on MobileNetV2-like blocks: the
whole run 5.44 to 4.84 ms).

The loops fill one output row (OW x OC sums) at a time: :func:`convolve` writes the sums,
:func:`convolve_requantized` requantizes each row while it is in cache (MLAS's step,
``requantize_row.pxi``) and writes codes.
"""

from libc.stddef cimport ptrdiff_t
from libc.stdint cimport int8_t, int16_t, int32_t, uint8_t, uint16_t
from libc.stdlib cimport calloc, free, malloc

include "requantize_row.pxi"

cdef extern from "depthwise_taps.h" nogil:
    void dml_taps16_uint8(int32_t* sums, const int32_t* start, const uint8_t* pixels, const ptrdiff_t* offsets, const int32_t* weights,
                          ptrdiff_t step, ptrdiff_t taps)
    void dml_taps16_int8(int32_t* sums, const int32_t* start, const int8_t* pixels, const ptrdiff_t* offsets, const int32_t* weights,
                         ptrdiff_t step, ptrdiff_t taps)

ctypedef fused code:
    uint8_t
    int8_t


def convolve(const code[:, :, :, ::1] x, int x_zero_point, const int16_t[:, :, :, ::1] centred_filter, const int32_t[::1] bias,
             int32_t[:, :, :, ::1] out, Py_ssize_t stride_h, Py_ssize_t stride_w, Py_ssize_t dilation_h, Py_ssize_t dilation_w,
             Py_ssize_t pad_top, Py_ssize_t pad_left):
    """The exact sums of a grouped convolution, [N, OH, OW, OC], from an NHWC input."""
    cdef Window window = _window(x, x_zero_point, centred_filter, bias, out.shape[2], out.shape[3], stride_h, stride_w, dilation_h,
                                 dilation_w, pad_top, pad_left)
    cdef Py_ssize_t n, oh
    try:
        with nogil:
            for n in range(out.shape[0]):
                for oh in range(out.shape[1]):
                    _row(x, x_zero_point, centred_filter, bias, &window, n, oh, &out[n, oh, 0, 0])
    finally:
        _release(&window)


def convolve_requantized(const code[:, :, :, ::1] x, int x_zero_point, const int16_t[:, :, :, ::1] centred_filter,
                         const int32_t[::1] bias, const float[::1] multiplier, const float[::1] low, const float[::1] high,
                         const uint8_t[::1] zero_byte, uint8_t[:, :, ::1] out, Py_ssize_t out_w, Py_ssize_t stride_h,
                         Py_ssize_t stride_w, Py_ssize_t dilation_h, Py_ssize_t dilation_w, Py_ssize_t pad_top, Py_ssize_t pad_left):
    """:func:`convolve`, then MLAS's requantize step (as ``requantize.mlas``, the bias already in
    the sums) on each output row: codes as bytes, [N, OH, OW * OC]; the other parameters are
    given per element of a row (OW * OC, a channel's repeated)."""
    cdef Py_ssize_t width = out.shape[2], n, oh
    if min(multiplier.shape[0], low.shape[0], high.shape[0], zero_byte.shape[0]) != width:
        raise ValueError(f"the requantize parameters must cover an output row ({width} values)")
    if width == 0:
        return
    cdef Window window = _window(x, x_zero_point, centred_filter, bias, out_w, width // out_w, stride_h, stride_w, dilation_h,
                                 dilation_w, pad_top, pad_left)
    cdef int32_t* sums = <int32_t*>malloc(width * sizeof(int32_t))
    cdef int32_t* zeros = <int32_t*>calloc(width, sizeof(int32_t))
    try:
        if sums == NULL or zeros == NULL:
            raise MemoryError()
        with nogil:
            for n in range(out.shape[0]):
                for oh in range(out.shape[1]):
                    _row(x, x_zero_point, centred_filter, bias, &window, n, oh, sums)
                    _codes(sums, zeros, &multiplier[0], &low[0], &high[0], &zero_byte[0], &out[n, oh, 0], width)
    finally:
        _release(&window)
        free(sums)
        free(zeros)


cdef struct Window:
    Py_ssize_t out_w, channels_out, per_group, outputs_per_group
    Py_ssize_t stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left
    Py_ssize_t depthwise  # the first channels summed LANES at a time (a multiple of LANES; 0 unless depthwise)
    # For a window wholly inside the input (:func:`_depthwise_inside`; malloc'd where ``depthwise``, else NULL):
    ptrdiff_t* offsets  # [KH * KW]: each tap's offset in the input from the window's first pixel, in codes
    int32_t* weights  # [KH * KW, C]: each centred weight in the low half of an int32 whose high half is 0
    int32_t* start  # [C]: the bias minus the input zero point times the channel's filter sum


cdef Window _window(const code[:, :, :, ::1] x, int x_zero_point, const int16_t[:, :, :, ::1] centred_filter, const int32_t[::1] bias,
                    Py_ssize_t out_w, Py_ssize_t channels_out, Py_ssize_t stride_h, Py_ssize_t stride_w, Py_ssize_t dilation_h,
                    Py_ssize_t dilation_w, Py_ssize_t pad_top, Py_ssize_t pad_left) except *:
    """What every row's loops read, worked out once per call."""
    cdef Window window
    cdef Py_ssize_t kernel_h = centred_filter.shape[0], kernel_w = centred_filter.shape[1], taps = kernel_h * kernel_w, t, c
    window.out_w, window.channels_out, window.per_group = out_w, channels_out, centred_filter.shape[2]
    window.outputs_per_group = channels_out * window.per_group // x.shape[3]
    window.stride_h, window.stride_w, window.dilation_h, window.dilation_w = stride_h, stride_w, dilation_h, dilation_w
    window.pad_top, window.pad_left = pad_top, pad_left
    window.depthwise = channels_out - channels_out % LANES if window.per_group == 1 and window.outputs_per_group == 1 else 0
    window.offsets, window.weights, window.start = NULL, NULL, NULL
    if not window.depthwise:
        return window
    window.offsets = <ptrdiff_t*>malloc(taps * sizeof(ptrdiff_t))
    window.weights = <int32_t*>malloc(taps * channels_out * sizeof(int32_t))
    window.start = <int32_t*>malloc(channels_out * sizeof(int32_t))
    if window.offsets == NULL or window.weights == NULL or window.start == NULL:
        _release(&window)
        raise MemoryError()
    for c in range(channels_out):
        window.start[c] = bias[c]
    for t in range(taps):
        window.offsets[t] = ((t // kernel_w) * dilation_h * x.shape[2] + (t % kernel_w) * dilation_w) * x.shape[3]
        for c in range(channels_out):
            window.weights[t * channels_out + c] = <uint16_t>centred_filter[t // kernel_w, t % kernel_w, 0, c]
            window.start[c] -= x_zero_point * centred_filter[t // kernel_w, t % kernel_w, 0, c]
    return window


cdef void _release(Window* window) noexcept:
    free(window.offsets)
    free(window.weights)
    free(window.start)


cdef void _row(const code[:, :, :, ::1] x, int x_zero_point, const int16_t[:, :, :, ::1] centred_filter, const int32_t[::1] bias,
               const Window* window, Py_ssize_t n, Py_ssize_t oh, int32_t* row) noexcept nogil:
    """Output row ``oh`` of image ``n``, [OW, OC]: a depthwise convolution's channels LANES at a
    time (:func:`_depthwise_inside` where the window lies inside the input, else
    :func:`_depthwise`), the other groups (and the last channels) one by one (:func:`_groups`)."""
    cdef Py_ssize_t kernel_h = centred_filter.shape[0], kernel_w = centred_filter.shape[1], ow, kh0, kh1, kw0, kw1
    cdef Py_ssize_t ih = oh * window.stride_h - window.pad_top, iw
    _taps(oh, window.stride_h, window.pad_top, window.dilation_h, kernel_h, x.shape[1], &kh0, &kh1)
    for ow in range(window.out_w):
        iw = ow * window.stride_w - window.pad_left
        _taps(ow, window.stride_w, window.pad_left, window.dilation_w, kernel_w, x.shape[2], &kw0, &kw1)
        if window.depthwise:
            if kh0 == 0 and kw0 == 0 and kh1 == kernel_h and kw1 == kernel_w:
                _depthwise_inside(&x[n, ih, iw, 0], window, kernel_h * kernel_w, row + ow * window.channels_out)
            else:
                _depthwise(x, x_zero_point, centred_filter, bias, window, n, ih, iw, kh0, kh1, kw0, kw1, row + ow * window.channels_out)
        if window.depthwise < window.channels_out:
            _groups(x, x_zero_point, centred_filter, bias, window, n, ih, iw, kh0, kh1, kw0, kw1, row + ow * window.channels_out)


cdef enum:
    LANES = 16  # output channels summed in registers at a time (measured: 32 does not vectorize, 7x slower)


cdef inline void _depthwise_inside(const code* origin, const Window* window, Py_ssize_t taps, int32_t* acc) noexcept nogil:
    """:func:`_depthwise` for a window wholly inside the input (``origin``: its first pixel), from
    the raw codes, the zero point folded into the start (``depthwise_taps.h``)."""
    cdef Py_ssize_t depth = window.channels_out, k, block
    for k in range(window.depthwise // LANES):
        block = k * LANES
        if code is uint8_t:
            dml_taps16_uint8(acc + block, window.start + block, origin + block, window.offsets, window.weights + block, depth, taps)
        else:
            dml_taps16_int8(acc + block, window.start + block, origin + block, window.offsets, window.weights + block, depth, taps)


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
