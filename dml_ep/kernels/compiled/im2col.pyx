"""im2col in one pass: each window of the NHWC input (any strides) copied into its GEMM row, padding filled
with the input zero point's byte (``dml_ep.kernels.im2col`` is the numpy twin, which pads a
copy of the input first, then copies the windows' view).
"""

from libc.stdint cimport uint8_t
from libc.string cimport memcpy, memset


def im2col(const uint8_t[:, :, :, :] x, uint8_t pad_byte, Py_ssize_t kernel_h, Py_ssize_t kernel_w, Py_ssize_t stride_h,
           Py_ssize_t stride_w, Py_ssize_t dilation_h, Py_ssize_t dilation_w, Py_ssize_t pad_top, Py_ssize_t pad_left,
           Py_ssize_t out_h, Py_ssize_t out_w, uint8_t[:, ::1] out):
    """``out[(n * OH + oh) * OW + ow, (kh * KW + kw) * C + c] = x[n, ih, iw, c]``, or the pad byte
    where (ih, iw) falls outside the input; 8-bit codes as bytes. ``x`` is read through its
    strides: an NCHW tensor's NHWC view is gathered here, not transposed in a pass of its own
    (measured on 1x3x224x224: numpy's transpose copy 152 us, about the whole im2col's time)."""
    cdef Py_ssize_t batch = x.shape[0], height = x.shape[1], width = x.shape[2], channels = x.shape[3]
    cdef Py_ssize_t n, oh, ow, kh, kw, ih, iw, row = 0
    cdef uint8_t* destination
    cdef Py_ssize_t span = kernel_w * channels  # a window row's codes
    cdef Py_ssize_t step = x.strides[3]  # from one channel to the next, in bytes
    cdef bint packed = step == 1  # a pixel's channels contiguous
    cdef bint packed_rows = packed and x.strides[2] == channels and dilation_w == 1  # a window row contiguous
    with nogil:
        for n in range(batch):
            for oh in range(out_h):
                for ow in range(out_w):
                    destination = &out[row, 0]
                    for kh in range(kernel_h):
                        ih = oh * stride_h - pad_top + kh * dilation_h
                        iw = ow * stride_w - pad_left
                        if packed_rows and 0 <= ih < height and 0 <= iw and iw + kernel_w <= width:
                            memcpy(destination, &x[n, ih, iw, 0], span)
                            destination += span
                            continue
                        for kw in range(kernel_w):
                            iw = ow * stride_w - pad_left + kw * dilation_w
                            if not (0 <= ih < height and 0 <= iw < width):
                                memset(destination, pad_byte, channels)
                            elif packed:
                                memcpy(destination, &x[n, ih, iw, 0], channels)
                            else:
                                _gather(destination, &x[n, ih, iw, 0], channels, step)
                            destination += channels
                    row += 1


cdef inline void _gather(uint8_t* destination, const uint8_t* pixel, Py_ssize_t channels, Py_ssize_t step) noexcept nogil:
    """A pixel's channels, ``step`` bytes apart, copied together."""
    cdef Py_ssize_t c
    for c in range(channels):
        destination[c] = pixel[c * step]
