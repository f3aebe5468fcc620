"""QLinearAdd computed, not looked up, in MLAS's float32 arithmetic (the ``"onnxruntime"`` table of
``operators.element_wise_quantized_linear_add`` is its twin): ``y = fma(p, rp, fma(q, rq, fixed))``
on the raw codes, rounded half to even and saturated as cvtps2dq and the clamp do.

Only a build with a hardware FMA (``HARDWARE_FMA``: x86-64-v3 and up, ARM64) runs it; elsewhere
libm's ``fmaf`` is exact but a call per element, slower than the table. The inputs are walked as
:mod:`table_lookup` walks them (``dml_ep.numerics.kernels.strided_rows``): ``*_rows`` byte offsets of each
row's first element from ``p`` and ``q``, ``*_step`` 0 (broadcast) or the stride along the span.
"""

from libc.math cimport fmaf
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t

cdef extern from *:
    """
    #if defined(__FMA__) || defined(__aarch64__) || defined(_M_ARM64)
    #define DML_EP_HARDWARE_FMA 1
    #else
    #define DML_EP_HARDWARE_FMA 0
    #endif
    """
    const int DML_EP_HARDWARE_FMA

HARDWARE_FMA = bool(DML_EP_HARDWARE_FMA)

ctypedef fused code:
    uint8_t
    int8_t


def add(size_t p, const int64_t[::1] p_rows, Py_ssize_t p_step, size_t q, const int64_t[::1] q_rows, Py_ssize_t q_step,
        uint8_t[::1] out, Py_ssize_t span, float rp, float rq, float fixed, int32_t low, int32_t high, bint signed):
    """``out[r * span + i]``: the code of ``fma(p[..], rp, fma(q[..], rq, fixed))``, clamped to
    ``[low, high]``, as its byte; ``signed``: the codes are int8, else uint8."""
    if signed:
        _add(<const int8_t*>p, p_rows, p_step, <const int8_t*>q, q_rows, q_step, out, span, rp, rq, fixed, low, high)
    else:
        _add(<const uint8_t*>p, p_rows, p_step, <const uint8_t*>q, q_rows, q_step, out, span, rp, rq, fixed, low, high)


cdef void _add(const code* p, const int64_t[::1] p_rows, Py_ssize_t p_step, const code* q, const int64_t[::1] q_rows,
               Py_ssize_t q_step, uint8_t[::1] out, Py_ssize_t span, float rp, float rq, float fixed,
               int32_t low, int32_t high) noexcept nogil:
    cdef Py_ssize_t rows = p_rows.shape[0], r, i
    cdef float flow = low, fhigh = high, addend
    cdef const code* x
    cdef const code* y
    cdef uint8_t* o
    for r in range(rows):
        x, y, o = <const code*>(<const uint8_t*>p + p_rows[r]), <const code*>(<const uint8_t*>q + q_rows[r]), &out[r * span]
        if p_step == 1 and q_step == 1:
            for i in range(span):
                o[i] = _code(fmaf(x[i], rp, fmaf(y[i], rq, fixed)), flow, fhigh)
        elif q_step == 0:  # q's term is the same over the row
            addend = fmaf(y[0], rq, fixed)
            for i in range(span):
                o[i] = _code(fmaf(x[i * p_step], rp, addend), flow, fhigh)
        else:
            for i in range(span):
                o[i] = _code(fmaf(x[i * p_step], rp, fmaf(y[i * q_step], rq, fixed)), flow, fhigh)


cdef union Bits:
    float value
    int32_t bits


cdef inline uint8_t _code(float value, float low, float high) noexcept nogil:
    """cvtps2dq's rounding then the clamp, as the clamp then rounding half to even by adding
    1.5 * 2^23 (the sum's low bits are the integer; both bounds are integers, so the order does not
    matter); beyond int32, or for NaN, cvtps2dq gives INT_MIN, which clamps to ``low``."""
    cdef float clamped = low if value < low else value
    cdef Bits rounded
    clamped = high if clamped > high else clamped
    rounded.value = (clamped if value < 2147483648.0 else low) + 12582912.0
    return <uint8_t>rounded.bits
