# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Float32 values to 8-bit codes with one scale and zero point (QuantizeLinear per tensor,
DynamicQuantizeLinear): the quotient, rounding, clamp and zero point in one pass (the numpy twins
are ``element_wise_quantize_linear.onnxruntime_quantize`` and ``ideal_quantize``).

Codes are written as bytes: ``low`` and ``high`` are ``Min - zp`` and ``Max - zp``, ``zero_byte``
the zero point's byte and ``nan_byte`` the code a NaN gets (Min's byte).
"""

from libc.stdint cimport int32_t, int64_t, uint8_t

cdef union Bits:
    float value
    int32_t bits


def mlas(const float[::1] x, float scale, float low, float high, uint8_t zero_byte, uint8_t nan_byte, uint8_t[::1] out):
    """MLAS's QuantizeLinear: float32 ``x / scale``, clamped, rounded half to even (by adding
    1.5 * 2^23, cvtps2dq's rounding in range), plus the zero point; NaN to Min."""
    cdef Py_ssize_t n = x.shape[0], i
    cdef float addend = 12582912.0, quotient
    cdef Bits rounded
    with nogil:
        for i in range(n):
            quotient = x[i] / scale
            rounded.value = (low if quotient < low else (high if quotient > high else quotient)) + addend
            out[i] = <uint8_t>(<uint8_t>rounded.bits + zero_byte) if quotient == quotient else nan_byte


def directml(const float[::1] x, float scale, float low, float high, uint8_t zero_byte, uint8_t nan_byte, uint8_t[::1] out,
             int64_t[::1] suspects):
    """The correctly rounded ``x / scale``: the float32 quotient is the exact one correctly
    rounded, so it rounds to the same integer unless it lies within 2^-14 of a half-integer (its
    half ulp below 1024; larger quotients saturate whatever their rounding): those elements are
    listed in ``suspects`` for the exact tier, their count returned; the others as :func:`mlas`."""
    cdef Py_ssize_t n = x.shape[0], i
    cdef int64_t count = 0
    cdef float addend = 12582912.0, near = 0.5 - 0.00006103515625, one = 1, quotient, kept, distance  # 2^-14
    cdef Bits rounded
    with nogil:
        for i in range(n):
            quotient = x[i] / scale
            kept = low - one if quotient < low - one else (high + one if quotient > high + one else quotient)
            distance = kept - ((kept + addend) - addend)
            if distance >= near or distance <= -near:
                suspects[count] = i
                count += 1
            rounded.value = (low if quotient < low else (high if quotient > high else quotient)) + addend
            out[i] = <uint8_t>(<uint8_t>rounded.bits + zero_byte) if quotient == quotient else nan_byte
    return count
