"""Integer sums to float32 with a scale and a bias per column (MatMulIntegerToFloat's step after
the integer core), in one pass (the numpy twins are ``matrix_multiply_integer_to_float``'s
``scale_bias_onnxruntime`` and ``scale_bias_directml``). The sums are a C-contiguous
[rows, columns] array, int32 or float32 (exact integers); ``bias`` is empty for none.
"""

from libc.math cimport fabs
from libc.stdint cimport int32_t, int64_t, uint64_t

ctypedef fused accumulator:
    float
    int32_t

cdef union Bits64:
    double value
    uint64_t bits


def mlas(const accumulator[:, ::1] acc, const float[::1] multiplier, const float[::1] bias, float[:, ::1] out):
    """MLAS's scale-and-bias output processor: ``float32(float32(acc) * multiplier) + bias``."""
    cdef Py_ssize_t rows = acc.shape[0], columns = acc.shape[1], r, c
    cdef bint with_bias = bias.shape[0] != 0
    cdef const accumulator* sums
    cdef float* y
    cdef const float* m = &multiplier[0]
    cdef const float* b = &bias[0] if with_bias else NULL
    with nogil:
        for r in range(rows):
            sums, y = &acc[r, 0], &out[r, 0]
            if with_bias:
                for c in range(columns):
                    y[c] = <float>sums[c] * m[c] + b[c]
            else:
                for c in range(columns):
                    y[c] = <float>sums[c] * m[c]


cdef enum:
    BLOCK = 64  # columns checked for an element the float64 value cannot settle at a time, then scanned only where one is


def directml(const accumulator[:, ::1] acc, const double[::1] scale, const double[::1] bias, float[:, ::1] out,
             int64_t[::1] suspects):
    """``acc * scale + bias`` (``scale``: AScale * BScale, exact in float64) rounded once to
    float32 where the float64 value decides it, as the twin decides: its bits below float32's
    last say how far it lies from a float32 midpoint, in its own ulps; within 2 of one (more
    where the bias cancels the product), or outside float32's normal range, the element is
    listed in ``suspects`` for the exact tier, their count returned. Per row: the values, then
    per block of columns whether any is such an element (a reduction), and only then a scan."""
    cdef Py_ssize_t rows = acc.shape[0], columns = acc.shape[1], r, c, b, start, end
    cdef const double* offset = &bias[0] if bias.shape[0] else NULL
    cdef int64_t count = 0
    cdef int near
    with nogil:
        for r in range(rows):
            if offset != NULL:
                for c in range(columns):
                    out[r, c] = <float>(<double>acc[r, c] * scale[c] + offset[c])
            else:  # no + 0.0, which would turn a -0.0 into +0.0
                for c in range(columns):
                    out[r, c] = <float>(<double>acc[r, c] * scale[c])
            for b in range((columns + BLOCK - 1) // BLOCK):
                start, end = b * BLOCK, min(b * BLOCK + BLOCK, columns)
                near = 0
                for c in range(start, end):
                    near |= _unsettled(<double>acc[r, c] * scale[c], offset[c] if offset != NULL else 0.0, offset != NULL)
                if near:
                    for c in range(start, end):
                        if _unsettled(<double>acc[r, c] * scale[c], offset[c] if offset != NULL else 0.0, offset != NULL):
                            suspects[count] = r * columns + c
                            count += 1
    return count


cdef inline int _unsettled(double product, double bias, bint with_bias) noexcept nogil:
    """Whether ``product + bias`` in float64 may round to float32 otherwise than the exact sum
    (the twin's test, ``scale_bias_directml``)."""
    cdef Bits64 y
    cdef double tiny = 1.1754943508222875e-38, huge = 1.7014118346046923e+38, floor = 9.332636185032189e-302  # 2^-126, 2^127, 2^-1000
    cdef uint64_t below = (1 << 29) - 1, halfway = 1 << 28
    y.value = product + bias if with_bias else product
    cdef int64_t distance = <int64_t>(y.bits & below) - <int64_t>halfway
    distance = -distance if distance < 0 else distance
    cdef double magnitude = fabs(y.value)
    cdef double allowed = 2 + 2 * fabs(product) / (magnitude if magnitude > floor else floor) if with_bias else 2
    return (distance <= allowed) | ((magnitude < tiny) & (magnitude > 0)) | (magnitude >= huge)
