"""The requantize step compiled: one pass from the integer core's sums to 8-bit codes, the scaling,
rounding, clamp and zero point fused (``dml_ep.numerics.kernels.quantize`` is its numpy twin).

The sums are a C-contiguous [rows, columns] array, int32 or float32 (exact integers), and ``bias``
is added to them per column (the products' bias, added here as MLAS's output stage adds it, in
int32, not in a pass of its own; zeros for none, and for float32 sums); every other
parameter is given per column (a scalar repeated), which covers the products' channels-last and
per-column scales. Codes are written as bytes (an int8 code as its byte). The inner loops run on
plain pointers and local constants, so that the compiler vectorizes them (a byte store may alias
anything it could otherwise keep in registers).
"""

from libc.math cimport fabs
from libc.stdint cimport int32_t, int64_t, uint8_t

include "requantize_row.pxi"


def mlas(const accumulator[:, ::1] acc, const int32_t[::1] bias, const float[::1] multiplier, const float[::1] low, const float[::1] high,
         const uint8_t[::1] zero_byte, uint8_t[:, ::1] out):
    """MLAS's MlasRequantizeOutput: ``float32(acc + bias) * multiplier``, clamped to ``[low, high]``
    (``Min - zp``, ``Max - zp``), rounded half to even by adding 1.5 * 2^23 (cvtps2dq's rounding
    for |x| <= 2^22: the sum's low bits are the integer), plus the zero point's byte; float32
    operations in the twin's order, so the same bits."""
    cdef Py_ssize_t rows = acc.shape[0], columns = acc.shape[1], r
    with nogil:
        for r in range(rows):
            _codes(&acc[r, 0], &bias[0], &multiplier[0], &low[0], &high[0], &zero_byte[0], &out[r, 0], columns)


def directml(const accumulator[:, ::1] acc, const int32_t[::1] bias, const float[::1] ratio32, const float[::1] low, const float[::1] high,
             const uint8_t[::1] zero_byte, const double[::1] ratio, uint8_t[:, ::1] out, int64_t[::1] suspects):
    """DirectML's rounding of ``(acc + bias) * ratio``, correctly rounded, in the twin's tiers: a float32
    estimate (``ratio32``: the ratio rounded to a normal float32; its error is under 2^-21
    relative, so within the output range under 2^-12), rounded where it lies farther than that
    from a half-integer; a float64 estimate (error under 2^-44 relative) for those closer; elements
    it cannot settle either are listed in ``suspects`` (flat indices) for the exact tier, their
    count returned. Codes as in :func:`mlas`: clamped to ``[low, high]`` (``Min - zp``,
    ``Max - zp``), plus the zero point's byte.

    Per row: the codes from the float32 estimate (:func:`mlas`'s loop), then, per block of
    columns, whether any element lies near a half-integer (a reduction), and only then a scan of
    that block. Each pass vectorizes; one doing all three does not."""
    cdef Py_ssize_t rows = acc.shape[0], columns = acc.shape[1], r, c
    cdef int64_t count = 0
    cdef const accumulator* sums
    cdef uint8_t* codes
    cdef const int32_t* add = &bias[0]
    cdef const float* k32 = &ratio32[0]
    cdef const float* lo = &low[0]
    cdef const float* hi = &high[0]
    cdef const uint8_t* zp = &zero_byte[0]
    cdef const double* k = &ratio[0]
    cdef int64_t* found = &suspects[0]
    cdef Py_ssize_t b, block, end
    cdef int near_half
    cdef float addend = 12582912.0, margin = 0.000244140625  # 1.5 * 2^23; 2^-12
    with nogil:
        for r in range(rows):
            sums, codes = &acc[r, 0], &out[r, 0]
            _codes(sums, add, k32, lo, hi, zp, codes, columns)
            for b in range((columns + BLOCK - 1) // BLOCK):
                block, end = b * BLOCK, min(b * BLOCK + BLOCK, columns)
                near_half = 0
                for c in range(block, end):
                    near_half |= _near_half(<float>(sums[c] + add[c]) * k32[c], lo[c], hi[c], addend, margin)
                if near_half:
                    count = _settle(sums, add, k32, lo, hi, zp, k, codes, block, end, r * columns, found, count)
    return count


cdef enum:
    BLOCK = 64  # columns checked for a near half-integer at a time: a wide row has one somewhere (2^-11 of the elements)


cdef int64_t _settle(const accumulator* sums, const int32_t* bias, const float* k32, const float* lo, const float* hi, const uint8_t* zp,
                     const double* k, uint8_t* codes, Py_ssize_t start, Py_ssize_t end, int64_t row_start,
                     int64_t* suspects, int64_t count) noexcept nogil:
    """The float64 tier for the elements of ``codes[start:end]`` near a half-integer in float32;
    those it cannot settle either are added to ``suspects`` (from ``count``): the new count."""
    cdef float addend = 12582912.0, margin = 0.000244140625  # 1.5 * 2^23; 2^-12
    cdef double addend64 = 6755399441055744.0, tolerance = 5.684341886080802e-14  # 1.5 * 2^52; 2^-44
    cdef double estimate64, rounded64, magnitude
    cdef Py_ssize_t c
    for c in range(start, end):
        if not _near_half(<float>(sums[c] + bias[c]) * k32[c], lo[c], hi[c], addend, margin):
            continue
        estimate64 = <double>(sums[c] + bias[c]) * k[c]  # within the output range
        rounded64 = (estimate64 + addend64) - addend64
        magnitude = fabs(estimate64) if fabs(estimate64) > 1 else 1.0
        if fabs(estimate64 - rounded64) >= 0.5 - tolerance * magnitude:
            suspects[count] = row_start + c
            count += 1
            continue
        rounded64 = lo[c] if rounded64 < lo[c] else rounded64
        rounded64 = hi[c] if rounded64 > hi[c] else rounded64
        codes[c] = <uint8_t>(<uint8_t><int32_t>rounded64 + zp[c])
    return count


cdef inline int _near_half(float estimate, float lo, float hi, float addend, float margin) noexcept nogil:
    """Whether the float32 estimate, clamped just outside the output range (to an integer there),
    lies within ``margin`` of a half-integer. Every constant is a float: Cython's literals are
    doubles, which would take the comparisons to float64."""
    cdef float one = 1, half = 0.5
    estimate = lo - one if estimate < lo - one else estimate
    estimate = hi + one if estimate > hi + one else estimate
    cdef float distance = estimate - ((estimate + addend) - addend)
    return (distance >= half - margin) | (distance <= margin - half)
