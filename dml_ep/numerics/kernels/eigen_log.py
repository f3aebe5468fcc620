"""onnxruntime's CPU Log on float32, bit for bit: Eigen's vectorized ``plog_float``.

onnxruntime's ``Log<float>`` (``core/providers/cpu/math/element_wise_ops.cc``) is
``EigenMap<float>(Y) = EigenMap<float>(X).array().log()``, which Eigen evaluates with its packet
``plog_impl_float`` (``Eigen/src/Core/arch/Default/GenericPacketMathFunctions.h``): the mantissa in
[sqrt(1/2), sqrt(2)) minus one, a rational (3, 3) approximation of log(1 + x), plus e * ln 2.
onnxruntime's x86-64 build compiles Eigen for SSE2 without FMA, so each ``pmadd`` is a float32
multiply then a float32 add (two roundings), and ``pdiv`` an IEEE division. Eigen runs the packet
code on four floats at a time and the last ``N % 4`` elements of the tensor through scalar
``std::log`` (glibc's ``logf``), taken here as the correctly rounded log (glibc's logf is within
0.82 ULP, almost always that). NaN bits as onnxruntime writes them: the packets' ``por`` with the
invalid mask gives 0xFFFFFFFF for a NaN or negative input, ``logf`` the quieted input NaN or x86's
default NaN (0xFFC00000). Checked against onnxruntime 1.32.0 on an AVX-512 host: every 997th float32
bit pattern (about 4.3 million values, denormals, infinities, NaN and negatives included) agrees bit
for bit, and every float16 value through onnxruntime's Casts.
"""

from __future__ import annotations

import numpy as np

_F32 = np.float32
_SQRT_HALF = _F32(0.707106781186547524)
_P = (_F32(1.0000000190281136), _F32(1.0000000190281063), _F32(0.18256296349849254))  # p1, p2, p3
_Q = (_F32(1.4999999999999927), _F32(0.59923249590823520), _F32(0.049616247954120038))  # q1, q2, q3
_LN2 = _F32(0.693147180559945309417)  # static_cast<float>(EIGEN_LN2)
_ALL_ONES = np.uint32(0xFFFFFFFF).view(_F32)
_DEFAULT_NAN = np.uint32(0xFFC00000).view(_F32)


def _madd(x, y, z) -> np.ndarray:
    """SSE2's ``pmadd``: ``x * y`` rounded to float32, then ``+ z`` rounded."""
    return np.add(np.multiply(x, y, dtype=_F32), z, dtype=_F32)


def plog_float(x: np.ndarray) -> np.ndarray:
    """Eigen's packet log of float32 ``x`` as onnxruntime's SSE2 build runs it: -inf at zero,
    0xFFFFFFFF (a NaN) below zero and for NaN, +inf at +inf."""
    x = np.asarray(x, _F32)
    with np.errstate(all="ignore"):
        mantissa, exponent = np.frexp(x)  # pfrexp: a mantissa in [0.5, 1), denormals normalised
        below = mantissa < _SQRT_HALF
        e = np.subtract(exponent.astype(_F32), below.astype(_F32), dtype=_F32)
        m = np.add(np.subtract(mantissa.astype(_F32), _F32(1), dtype=_F32), np.where(below, mantissa, 0).astype(_F32), dtype=_F32)
        p = np.multiply(m, _madd(m, _madd(m, _P[2], _P[1]), _P[0]), dtype=_F32)
        q = _madd(m, _madd(m, _madd(m, _Q[2], _Q[1]), _Q[0]), _F32(1))
        y = _madd(e, _LN2, np.divide(p, q, dtype=_F32))
        y = np.where(x == np.inf, _F32(np.inf), y)
        y = np.where((x < 0) | np.isnan(x), _ALL_ONES, y)
        return np.where(x == 0, _F32(-np.inf), y).astype(_F32)


def scalar_log(x: np.ndarray) -> np.ndarray:
    """``std::log`` of float32 ``x`` (glibc's logf) as the correctly rounded log; a NaN input quieted,
    x86's default NaN below zero."""
    x = np.asarray(x, _F32)
    with np.errstate(all="ignore"):
        y = np.log(x.astype(np.float64)).astype(_F32)
    quieted = (x.view(np.uint32) | np.uint32(0x00400000)).view(_F32)
    return np.where(np.isnan(x), quieted, np.where(x < 0, _DEFAULT_NAN, y)).astype(_F32)


def eigen_log(x: np.ndarray) -> np.ndarray:
    """onnxruntime's Log of a float32 tensor ``x``: packets of four, then the last ``size % 4`` elements scalar."""
    x = np.asarray(x, _F32)
    flat = x.reshape(-1)
    packets = flat.size - flat.size % 4
    return np.concatenate([plog_float(flat[:packets]), scalar_log(flat[packets:])]).reshape(x.shape)
