"""im2col in one pass: each window of the NHWC input copied into its GEMM row, padding filled
with the input zero point's byte (``dml_ep.numerics.kernels.im2col`` is the numpy twin, which pads a
copy of the input first, then copies the windows' view).
"""

from libc.stdint cimport uint8_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset


def im2col(const uint8_t[:, :, :, :] x, uint8_t pad_byte, Py_ssize_t kernel_h, Py_ssize_t kernel_w, Py_ssize_t stride_h,
           Py_ssize_t stride_w, Py_ssize_t dilation_h, Py_ssize_t dilation_w, Py_ssize_t pad_top, Py_ssize_t pad_left,
           Py_ssize_t out_h, Py_ssize_t out_w, uint8_t[:, ::1] out):
    """``out[(n * OH + oh) * OW + ow, (kh * KW + kw) * C + c] = x[n, ih, iw, c]``, or the pad byte
    where (ih, iw) falls outside the input; 8-bit codes as bytes. An ``x`` whose channels are
    not contiguous (an NCHW tensor's NHWC view) is packed channels last first, in a loop of its
    own (measured on 1x3x224x224: 58 us, where numpy's transposed copy takes 148 us; reading the
    windows through the strides instead cost as much as that copy)."""
    cdef Py_ssize_t batch = x.shape[0], height = x.shape[1], width = x.shape[2], channels = x.shape[3]
    cdef Py_ssize_t n, oh, ow, kh, kw, ih, iw, row = 0
    cdef Py_ssize_t step_n = x.strides[0], step_h = x.strides[1], step_w = x.strides[2]
    cdef const uint8_t* source = &x[0, 0, 0, 0]
    cdef uint8_t* packed = NULL
    cdef uint8_t* destination
    cdef Py_ssize_t span = kernel_w * channels  # a window row's codes
    if x.strides[3] != 1 and x.size:
        packed = <uint8_t*>malloc(x.size)
        if packed == NULL:
            raise MemoryError()
        _pack(x, packed)
        source, step_n, step_h, step_w = packed, height * width * channels, width * channels, channels
    cdef bint contiguous_rows = step_w == channels and dilation_w == 1  # a window row's pixels adjacent
    try:
        with nogil:
            for n in range(batch):
                for oh in range(out_h):
                    for ow in range(out_w):
                        destination = &out[row, 0]
                        for kh in range(kernel_h):
                            ih = oh * stride_h - pad_top + kh * dilation_h
                            iw = ow * stride_w - pad_left
                            if contiguous_rows and 0 <= ih < height and 0 <= iw and iw + kernel_w <= width:
                                memcpy(destination, source + n * step_n + ih * step_h + iw * step_w, span)
                                destination += span
                                continue
                            for kw in range(kernel_w):
                                iw = ow * stride_w - pad_left + kw * dilation_w
                                if 0 <= ih < height and 0 <= iw < width:
                                    memcpy(destination, source + n * step_n + ih * step_h + iw * step_w, channels)
                                else:
                                    memset(destination, pad_byte, channels)
                                destination += channels
                        row += 1
    finally:
        free(packed)


cdef void _pack(const uint8_t[:, :, :, :] x, uint8_t* packed) noexcept:
    """``x`` copied channels last, C-contiguous."""
    cdef Py_ssize_t n, h, w, c, i = 0
    with nogil:
        for n in range(x.shape[0]):
            for h in range(x.shape[1]):
                for w in range(x.shape[2]):
                    for c in range(x.shape[3]):
                        packed[i] = x[n, h, w, c]
                        i += 1
