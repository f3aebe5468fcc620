# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
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


def directml(const accumulator[:, ::1] acc, const double[::1] scale, const double[::1] bias, float[:, ::1] out,
             int64_t[::1] suspects):
    """``acc * scale + bias`` (``scale``: AScale * BScale, exact in float64) rounded once to
    float32 where the float64 value decides it, as the twin decides: its bits below float32's
    last say how far it lies from a float32 midpoint, in its own ulps; within 2 of one (more
    where the bias cancels the product), or outside float32's normal range, the element is
    listed in ``suspects`` for the exact tier, their count returned."""
    cdef Py_ssize_t rows = acc.shape[0], columns = acc.shape[1], r, c
    cdef bint with_bias = bias.shape[0] != 0
    cdef int64_t count = 0, distance
    cdef uint64_t below = (1 << 29) - 1, halfway = 1 << 28
    cdef double product, magnitude, cancels
    cdef double tiny = 1.1754943508222875e-38, huge = 1.7014118346046923e+38, floor = 9.332636185032189e-302  # 2^-126, 2^127, 2^-1000
    cdef bint near
    cdef Bits64 y
    with nogil:
        for r in range(rows):
            for c in range(columns):
                product = <double>acc[r, c] * scale[c]
                y.value = product + bias[c] if with_bias else product
                out[r, c] = <float>y.value
                distance = <int64_t>(y.bits & below) - <int64_t>halfway
                distance = -distance if distance < 0 else distance
                magnitude = fabs(y.value)
                near = distance <= 2
                if with_bias and not near:
                    cancels = fabs(product)
                    near = distance <= 2 + 2 * cancels / (magnitude if magnitude > floor else floor)
                if near or (magnitude < tiny and magnitude > 0) or magnitude >= huge:
                    suspects[count] = r * columns + c
                    count += 1
    return count
