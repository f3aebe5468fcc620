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
    with nogil:
        _codes(&x[0], scale, low, high, zero_byte, nan_byte, &out[0], x.shape[0])


cdef inline void _codes(const float* x, float scale, float low, float high, uint8_t zero_byte, uint8_t nan_byte, uint8_t* out,
                        Py_ssize_t n) noexcept nogil:
    cdef float addend = 12582912.0, quotient
    cdef Bits rounded
    cdef Py_ssize_t i
    for i in range(n):
        quotient = x[i] / scale
        rounded.value = (low if quotient < low else (high if quotient > high else quotient)) + addend
        out[i] = <uint8_t>(<uint8_t>rounded.bits + zero_byte) if quotient == quotient else nan_byte


cdef enum:
    BLOCK = 64  # elements checked for a quotient near a half-integer at a time, then scanned only where one is


def directml(const float[::1] x, float scale, float low, float high, uint8_t zero_byte, uint8_t nan_byte, uint8_t[::1] out,
             int64_t[::1] suspects):
    """The correctly rounded ``x / scale``: the float32 quotient is the exact one correctly
    rounded, so it rounds to the same integer unless it lies within 2^-14 of a half-integer (its
    half ulp below 1024; larger quotients saturate whatever their rounding): those elements are
    listed in ``suspects`` for the exact tier, their count returned; the codes as :func:`mlas`.
    Per block of elements: the codes, then whether any lies near a half (a reduction, which
    vectorizes), and only then a scan of that block."""
    cdef Py_ssize_t n = x.shape[0], b, i, start, end
    cdef int64_t count = 0
    cdef int near
    with nogil:
        _codes(&x[0], scale, low, high, zero_byte, nan_byte, &out[0], n)
        for b in range((n + BLOCK - 1) // BLOCK):
            start, end = b * BLOCK, min(b * BLOCK + BLOCK, n)
            near = 0
            for i in range(start, end):
                near |= _near_half(x[i] / scale, low, high)
            if near:
                for i in range(start, end):
                    if _near_half(x[i] / scale, low, high):
                        suspects[count] = i
                        count += 1
    return count


cdef inline int _near_half(float quotient, float low, float high) noexcept nogil:
    """Whether the quotient, clamped just outside the output range, lies within 2^-14 of a
    half-integer (NaN: no). Constants are floats: Cython's literals would take it to float64."""
    cdef float addend = 12582912.0, near = 0.49993896484375, one = 1  # 1.5 * 2^23; 0.5 - 2^-14
    cdef float kept = low - one if quotient < low - one else (high + one if quotient > high + one else quotient)
    cdef float distance = kept - ((kept + addend) - addend)
    return (distance >= near) | (distance <= -near)
