# MLAS's requantize step on one row of sums, included by the kernels that requantize in the same
# pass as they sum (requantize.pyx, direct_convolution.pyx): one source for its rounding.

from libc.stdint cimport int32_t, uint8_t

ctypedef fused accumulator:
    float
    int32_t

cdef union Bits:
    float value
    int32_t bits


cdef inline void _codes(const accumulator* sums, const int32_t* bias, const float* m, const float* lo, const float* hi, const uint8_t* zp,
                        uint8_t* codes, Py_ssize_t columns) noexcept nogil:
    """One row of ``requantize.mlas`` (and of ``requantize.directml``'s float32 tier, ``m`` its
    ratio): ``float32(sums + bias) * m``, clamped to ``[lo, hi]``, rounded half to even, plus the
    zero point's byte."""
    cdef float addend = 12582912.0, v
    cdef Bits rounded
    cdef Py_ssize_t c
    for c in range(columns):
        v = <float>(sums[c] + bias[c]) * m[c]
        v = lo[c] if v < lo[c] else v
        v = hi[c] if v > hi[c] else v
        rounded.value = v + addend
        codes[c] = <uint8_t>(<uint8_t>rounded.bits + zp[c])
