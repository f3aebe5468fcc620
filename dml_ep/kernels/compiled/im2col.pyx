"""im2col in one pass: each window of the NHWC input copied into its GEMM row, padding filled
with the input zero point's byte (``dml_ep.kernels.im2col`` is the numpy twin, which pads a
copy of the input first, then copies the windows' view).
"""

from libc.stdint cimport uint8_t
from libc.string cimport memcpy, memset


def im2col(const uint8_t[:, :, :, ::1] x, uint8_t pad_byte, Py_ssize_t kernel_h, Py_ssize_t kernel_w, Py_ssize_t stride_h,
           Py_ssize_t stride_w, Py_ssize_t dilation_h, Py_ssize_t dilation_w, Py_ssize_t pad_top, Py_ssize_t pad_left,
           Py_ssize_t out_h, Py_ssize_t out_w, uint8_t[:, ::1] out):
    """``out[(n * OH + oh) * OW + ow, (kh * KW + kw) * C + c] = x[n, ih, iw, c]``, or the pad byte
    where (ih, iw) falls outside the input; 8-bit codes as bytes."""
    cdef Py_ssize_t batch = x.shape[0], height = x.shape[1], width = x.shape[2], channels = x.shape[3]
    cdef Py_ssize_t n, oh, ow, kh, kw, ih, iw, row = 0
    cdef uint8_t* destination
    cdef Py_ssize_t span = kernel_w * channels  # a window row's bytes: contiguous in the input without dilation
    cdef bint contiguous_rows = dilation_w == 1
    with nogil:
        for n in range(batch):
            for oh in range(out_h):
                for ow in range(out_w):
                    destination = &out[row, 0]
                    for kh in range(kernel_h):
                        ih = oh * stride_h - pad_top + kh * dilation_h
                        iw = ow * stride_w - pad_left
                        if contiguous_rows and 0 <= ih < height and 0 <= iw and iw + kernel_w <= width:
                            memcpy(destination, &x[n, ih, iw, 0], span)
                            destination += span
                            continue
                        for kw in range(kernel_w):
                            iw = ow * stride_w - pad_left + kw * dilation_w
                            if 0 <= ih < height and 0 <= iw < width:
                                memcpy(destination, &x[n, ih, iw, 0], channels)
                            else:
                                memset(destination, pad_byte, channels)
                            destination += channels
                    row += 1
