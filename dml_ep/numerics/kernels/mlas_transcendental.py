"""onnxruntime's CPU transcendental kernels (MLAS) on float32, bit for bit: logistic, tanh, erf and
the exact GELU built on erf, as x86-64 hosts run them.

Each kernel evaluates a fixed polynomial or rational approximation; with ``fused=True`` (MLAS's
FMA3 kernels, and AVX-512F's for erf, which x86-64 CPUs with AVX2 and FMA3 run) every multiply-add
is rounded once (:func:`~dml_ep.numerics.kernels.float32_fma.fma32`, as ``vfmadd`` rounds), with
``fused=False`` (MLAS's generic SSE kernels, older CPUs) a multiply, then an add. So the emulation
follows the instruction sequence, not the function: sources are onnxruntime's
``onnxruntime/core/mlas/lib/`` (``logistic.cpp`` + ``x86_64/LogisticKernelFma3.S``, ``tanh.cpp`` +
``x86_64/TanhKernelFma3.S``, ``erf.cpp``, ``intrinsics/avx512/gelu_avx512f.cpp``) and
``core/providers/cpu/tensor/gelu.cc``. Checked against onnxruntime 1.32.0: on an AVX-512 host every
one of about 4.3 million float32 values spread over all bit patterns (every 997th) and all 65536
float16 values (through float32, as onnxruntime's InsertCastTransformer runs a float16 node these
operators have no float16 CPU kernel for) agree bit for bit, NaN, infinities and denormals
included; so do every 9973rd pattern under ``qemu-x86_64 -cpu Haswell`` (AVX2 and FMA3, no
AVX-512: MlasErfKernelFma3 gives the AVX-512 kernel's bits there) and ``-cpu Nehalem``
(``fused=False``). Arm hosts (NEON and fp16 kernels) are not modelled.
"""

from __future__ import annotations

import functools

import numpy as np
from onnx import TensorProto, helper

from ...core.graph import internal_model
from ...ort.reference import cpu_session
from .float32_fma import fma32

_F32 = np.float32
_SIGN = np.uint32(0x80000000)

# MlasLogisticConstants (logistic.cpp), in the order LogisticKernelFma3.S uses them.
_LOGISTIC = np.array([-18.0, 18.0, 4.37031012579801e-11, 1.15627324459942e-07, 6.08574864600143e-05, 8.51377133304701e-03,
                      2.48287947061529e-01, 6.10247389755681e-13, 5.76102136993427e-09, 6.29106785017040e-06, 1.70198817374094e-03,
                      1.16817656904453e-01, 9.93151921023180e-01, 0.5], dtype=_F32)

# MlasTanhConstants (tanh.cpp, Eigen's rational approximation): clamp, then alpha_13 .. alpha_1, beta_6 .. beta_0.
_TANH_RANGE = _F32(9.0)
_TANH_P = np.array([-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08, 1.48572235717979e-05,
                    6.37261928875436e-04, 4.89352455891786e-03], dtype=_F32)
_TANH_Q = np.array([1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03], dtype=_F32)

# The erf constants of the AVX-512F kernel (gelu_avx512f.cpp's GeluAvx512Constants; erf.cpp's MlasErfConstants
# with the upper clamp 3.925): |x| clamped to 3.925; below the split an odd polynomial in x^2, above it
# 1 - exp(-p(|x|)), exp by a range reduction to 2^r * q(f).
_ERF_UPPER, _ERF_SPLIT = _F32(3.925), _F32(0.921875)
_ERF_SMALL = np.array([-5.99104969e-4, 4.99339588e-3, -2.67667342e-2, 1.12818025e-1, -3.76124859e-1, 1.28379151e-1], dtype=_F32)
_ERF_BIG = np.array([1.72948930e-5, -3.83208680e-4, 3.88393435e-3, -2.42545605e-2, 1.06777847e-1, 6.34846687e-1, 1.28717512e-1],
                    dtype=_F32)
_EXP_LOWER, _LOG2_RECIPROCAL, _LOG2_HI, _LOG2_LO, _ROUNDER = np.array(
    [-88.3762626647949, 1.44269504088896341, -6.93145752e-1, -1.42860677e-6, 1.25829120e+7], dtype=_F32)
_EXP_P = np.array([1.38319808e-3, 8.37550033e-3, 4.16689515e-2, 1.66664466e-1, 4.99999851e-1, 1.0, 1.0], dtype=_F32)

_SQRT1_2 = _F32(0.70710678118654752440)  # static_cast<float>(M_SQRT1_2)
_SQRT1_2_FLOAT16 = _F32(np.float16(0.70710678118654752440))  # com.microsoft Gelu's function body: a float16 constant


def _multiply_then_add(x, y, z) -> np.ndarray:
    return np.add(np.multiply(x, y, dtype=_F32), z, dtype=_F32)


def _horner(coefficients: np.ndarray, v: np.ndarray, multiply_add=fma32) -> np.ndarray:
    """``((c0 v + c1) v + c2) ...`` with one rounding per multiply-add."""
    r = multiply_add(coefficients[0], v, coefficients[1])
    for c in coefficients[2:]:
        r = multiply_add(r, v, c)
    return r


def mlas_logistic(x: np.ndarray, fused: bool = True) -> np.ndarray:
    """MlasLogisticKernelFma3 on float32 ``x``: clamp to [-18, 18] (NaN passes), ``x2 = x * x``,
    ``p = x * (((a9 x2 + a7) x2 + a5) x2 + a3) x2 + a1)``, ``q = ((((b10 x2 + b8) x2 + b6) x2 + b4)
    x2 + b2) x2 + b0`` with every multiply-add one rounding (``vfmadd``), ``p / q + 0.5``, clamped
    below at 0 (``maxps(0, r)``: NaN passes). ``fused=False``: MLAS's generic kernel, which x86-64
    CPUs without FMA3 run, each multiply-add a multiply, then an add (two roundings), the result
    also clamped above at 1."""
    low, high, a9, a7, a5, a3, a1, b10, b8, b6, b4, b2, b0, half = _LOGISTIC
    x = np.asarray(x, dtype=_F32)
    v = np.where(x < low, low, np.where(x > high, high, x))
    x2 = np.multiply(v, v, dtype=_F32)
    multiply_add = fma32 if fused else _multiply_then_add
    p = _horner(np.array([a9, a7, a5, a3, a1], _F32), x2, multiply_add)
    q = _horner(np.array([b10, b8, b6, b4, b2, b0], _F32), x2, multiply_add)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.add(np.divide(np.multiply(v, p, dtype=_F32), q, dtype=_F32), half, dtype=_F32)
    if not fused:
        r = np.where(r > 1, _F32(1), r)
    return np.where(r < 0, _F32(0), r).reshape(x.shape)


def mlas_tanh(x: np.ndarray, fused: bool = True) -> np.ndarray:
    """MlasComputeTanhF32KernelFma3 (``fused=False``: MlasTanhKernel): clamp to [-9, 9] (NaN
    passes), ``p = x * alpha(x^2)``, ``q = beta(x^2)``, ``p / q``."""
    x = np.asarray(x, dtype=_F32)
    v = np.where(x < -_TANH_RANGE, -_TANH_RANGE, np.where(x > _TANH_RANGE, _TANH_RANGE, x))
    x2 = np.multiply(v, v, dtype=_F32)
    multiply_add = fma32 if fused else _multiply_then_add
    p = np.multiply(_horner(_TANH_P, x2, multiply_add), v, dtype=_F32)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.divide(p, _horner(_TANH_Q, x2, multiply_add), dtype=_F32).reshape(x.shape)


def mlas_erf(x: np.ndarray, fused: bool = True) -> np.ndarray:
    """MlasErfKernelAvx512F (the steps of gelu_avx512f.cpp's MlasGeluErfAvx512; MlasErfKernelFma3 and,
    ``fused=False``, MlasErfKernel give the same bits): ``a = min(|x|, 3.925)``
    (NaN passes); ``a > 0.921875``: ``1 - exp(-big(a))``, else ``small(a^2) * a + a``; the sign of x
    put back by OR. exp(v) = ``2^r * q(f)``, ``r = round(v / ln 2)`` by adding and subtracting
    1.5 * 2^23, ``f = v - r ln 2`` in two fused steps, ``_mm512_scalef_ps`` for the power of two."""
    fma = fma32 if fused else _multiply_then_add
    x = np.asarray(x, dtype=_F32)
    bits = x.view(np.uint32)
    a = (bits & ~_SIGN).view(_F32)
    a = np.where(a > _ERF_UPPER, _ERF_UPPER, a)
    small = fma(_horner(_ERF_SMALL, np.multiply(a, a, dtype=_F32), fma), a, a)
    split = a > _ERF_SPLIT
    b = np.where(split, a, _F32(0))
    v = -fma(_horner(_ERF_BIG, b, fma), b, b)
    v = np.where(v < _EXP_LOWER, _EXP_LOWER, v)
    r = np.subtract(fma(_LOG2_RECIPROCAL, v, _ROUNDER), _ROUNDER, dtype=_F32)
    f = fma(r, _LOG2_LO, fma(r, _LOG2_HI, v))
    with np.errstate(invalid="ignore"):
        power = np.ldexp(_horner(_EXP_P, f, fma), np.nan_to_num(r).astype(np.int32)).astype(_F32)
    big = np.subtract(_F32(1), power, dtype=_F32)
    return (np.where(split, big, small).view(np.uint32) | (bits & _SIGN)).view(_F32).reshape(x.shape)


def mlas_gelu(x: np.ndarray, fused: bool = True) -> np.ndarray:
    """onnxruntime's float32 Gelu (com.microsoft Gelu, ONNX Gelu-20 ``approximate="none"``, and the
    erf of com.microsoft BiasGelu): ``(0.5 * x) * (erf(x * float(1/sqrt(2))) + 1)``, each step a
    float32 rounding, erf :func:`mlas_erf`."""
    x = np.asarray(x, dtype=_F32)
    e = mlas_erf(np.multiply(x, _SQRT1_2, dtype=_F32), fused)
    return np.multiply(np.multiply(_F32(0.5), x, dtype=_F32), np.add(e, _F32(1), dtype=_F32), dtype=_F32)


def gelu_function_body(x: np.ndarray, fused: bool = True) -> np.ndarray:
    """com.microsoft Gelu on float16, which onnxruntime's CPU EP has no kernel for: its schema's
    function body, inlined and run in float32 through InsertCastTransformer: ``x * ((erf(C * x) +
    1) * 0.5)`` with C the float16 constant 0.70703125 (1/sqrt(2) rounded to float16)."""
    x = np.asarray(x, dtype=_F32)
    e = mlas_erf(np.multiply(_SQRT1_2_FLOAT16, x, dtype=_F32), fused)
    return np.multiply(x, np.multiply(np.add(e, _F32(1), dtype=_F32), _F32(0.5), dtype=_F32), dtype=_F32)


# Inputs whose logistic MLAS's FMA3 kernel and its generic one round apart (0 against 2^-24 or 2^-25).
_FUSION_PROBE = np.array([-17.9982, -17.9964, -17.9946, -17.9910, -17.9892, -17.9874, -17.9838, -17.9820], np.float32)


@functools.lru_cache(maxsize=1)
def host_logistic_fused() -> bool:
    """Whether the host's onnxruntime runs MLAS's FMA3 logistic kernel (x86-64 with FMA3 and AVX2)
    rather than its generic one (older x86-64 CPUs), measured once on its Sigmoid: CPU flags would
    only guess MLAS's choice. MLAS picks its tanh and erf kernels on the same condition
    (platform.cpp), so this is ``fused`` for each of them."""
    graph = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["y"])], "logistic_probe",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [len(_FUSION_PROBE)])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    y = cpu_session(internal_model(graph, 13), threads=1).run(None, {"x": _FUSION_PROBE})[0]
    return bool(np.array_equal(y, mlas_logistic(_FUSION_PROBE)))
