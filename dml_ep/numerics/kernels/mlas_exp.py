"""MLAS's exp kernels on float32, bit for bit, as x86-64 hosts run them: MlasComputeExp (onnxruntime's
Exp node, and the Exp of a function body onnxruntime inlines, such as float16 Softmax's) and
MlasComputeSoftmax's sum-exp (onnxruntime's float32 Softmax).

A kernel is named by its vector width, ``lanes``: 16 the AVX-512F one (x86_64/TransKernelAvx512F.S,
``vscalefps`` scales by 2^m with one rounding), 8 the FMA3 one (TransKernelFma3.S, 2^m built in the
exponent bits), 4 the generic SSE2 one (compute.cpp, each multiply-add a multiply then an add). All
share MlasExpConstants' range reduction and polynomial. The exp kernels and the sum-exp kernels are
chosen separately (platform.cpp's ``ComputeExpF32Kernel``, ``ComputeSumExpF32Kernel``), and what
onnxruntime 1.32 runs is measured, not read from the CPU flags: on an AVX-512F host its Softmax runs
the AVX-512F sum-exp kernel (:func:`host_sum_exp_lanes` is 16), but its Exp node gives the FMA3 exp
kernel's bits (:func:`host_exp_lanes` is 8: every 997th float32 bit pattern agrees, while the
AVX-512F kernel would give NaN for +inf, which onnxruntime's Exp maps to +inf). Where both kernels
are defined, on ``x <= 88.72`` (a softmax's ``x - max <= 0``), the AVX-512F and FMA3 exps agree bit for
bit: both round ``p(r)`` once and scale it with one rounding; they part only above, where the FMA3
kernel clamps and the AVX-512F one scales whatever the reduction left. Arm64's kernels are not
modelled.
"""

from __future__ import annotations

import functools

import numpy as np
from onnx import TensorProto, helper

from ...core.graph import internal_model
from ...ort.reference import cpu_session
from .float32_fma import fma32

# MlasExpConstants (mlas/lib/compute.cpp), as float32.
_LOWER_RANGE, _LOWER_RANGE_SUM_EXP = np.float32(-103.9720840454), np.float32(-88.3762626647949)
_UPPER_RANGE = np.float32(88.7762626647950)
_ROUNDING_BIAS, _LOG2_RECIPROCAL = np.float32(12582912.0), np.float32(1.44269504088896341)
_LOG2_HIGH, _LOG2_LOW = np.float32(-6.93145752e-1), np.float32(-1.42860677e-6)
_POLY = tuple(np.float32(float.fromhex(h)) for h in ("0x1.694000p-10", "0x1.125edcp-7", "0x1.555b5ap-5", "0x1.555450p-3",
                                                      "0x1.fffff6p-2", "0x1.000000p+0"))
_MAXIMUM_EXPONENT = np.int32(0x3F800000)
_MINIMUM_EXPONENT = np.int32(-0x3F000000)  # int32(0xC1000000)
_SCALEF_RANGE = 400  # vscalefps's 2^m: beyond +-400 any float32 p is past overflow or underflow already


def _multiply_add(lanes: int):
    """MLAS's multiply-add: one rounding (``vfmadd``) in the AVX-512F and FMA3 kernels, a multiply then
    an add in the SSE2 one (``lanes=4``)."""
    if lanes == 4:
        return lambda x, y, z: np.add(np.multiply(x, y, dtype=np.float32), z, dtype=np.float32)
    return lambda x, y, z: fma32(x, y, z).reshape(np.shape(x) if np.ndim(x) else np.shape(y))


def _reduced(v: np.ndarray, multiply_add) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The range reduction ``x = m ln2 + r``: the biased ``m`` (its bits give 2^m), ``m`` and ``r``."""
    biased = multiply_add(v, _LOG2_RECIPROCAL, _ROUNDING_BIAS)
    m = np.subtract(biased, _ROUNDING_BIAS, dtype=np.float32)
    return biased, m, multiply_add(m, _LOG2_LOW, multiply_add(m, _LOG2_HIGH, v))


def mlas_sum_exp_values(v: np.ndarray, lanes: int) -> np.ndarray:
    """MLAS's exp of ``v = x + (-max)`` (float32) in its sum-exp kernels: the AVX-512F kernel's
    (``lanes=16``, also its exp kernel), the FMA3 kernel's (8) or the generic SSE2 one's (4,
    compute.cpp's MlasComputeSumExpVector)."""
    low = _LOWER_RANGE if lanes == 16 else _LOWER_RANGE_SUM_EXP
    v = np.where(v < low, low, v)  # vmaxps(low, v): a NaN passes
    multiply_add = _multiply_add(lanes)
    biased, m, v = _reduced(v, multiply_add)
    p = np.full(v.shape, _POLY[0], np.float32)
    for coefficient in (*_POLY[1:], _POLY[-1]):  # poly_1 .. poly_4, then poly_56 twice
        p = multiply_add(p, v, coefficient)
    if lanes == 16:  # vscalefps: p * 2^m, rounded once
        exponent = np.clip(np.nan_to_num(m, nan=0.0), -_SCALEF_RANGE, _SCALEF_RANGE).astype(np.int32)
        with np.errstate(invalid="ignore", over="ignore"):
            return np.ldexp(p, exponent).astype(np.float32)
    scale = ((biased.view(np.int32) << 23) + _MAXIMUM_EXPONENT).view(np.float32)  # vpslld 23, vpaddd: 2^m in the exponent bits
    return np.multiply(p, scale, dtype=np.float32)


def mlas_exp(x: np.ndarray, lanes: int) -> np.ndarray:
    """MlasComputeExp on float32 ``x``: the AVX-512F kernel (``lanes=16``) is the sum-exp one's exp
    (``vscalefps``, no upper clamp); the FMA3 (8) and SSE2 (4) kernels clamp to [-103.97, 88.78] and
    scale by two powers of two, ``normal`` and ``overflow`` (compute.cpp's MlasComputeExpVector), so
    that results reach the subnormal range."""
    if lanes == 16:
        return mlas_sum_exp_values(x, 16)
    multiply_add = _multiply_add(lanes)
    v = np.where(x > _UPPER_RANGE, _UPPER_RANGE, np.where(x < _LOWER_RANGE, _LOWER_RANGE, x))
    biased, _, v = _reduced(v, multiply_add)
    overflow = biased.view(np.int32) << 23
    normal = np.clip(overflow, _MINIMUM_EXPONENT, _MAXIMUM_EXPONENT)
    overflow_scale = (overflow - normal + _MAXIMUM_EXPONENT).view(np.float32)
    p = np.full(v.shape, _POLY[0], np.float32)
    for coefficient in _POLY[1:]:  # poly_1 .. poly_4, poly_56 once
        p = multiply_add(p, v, coefficient)
    p = multiply_add(p, np.multiply(v, overflow_scale, dtype=np.float32), overflow_scale)
    return np.multiply(p, (normal + _MAXIMUM_EXPONENT).view(np.float32), dtype=np.float32)


def mlas_lane_sum(values: np.ndarray, lanes: int) -> np.ndarray:
    """The sum-exp kernel's sum of each row of ``values`` (rows x D, float32): ``lanes``
    accumulators, three vectors a step then one (the tail masked), then its horizontal reduction;
    the SSE2 kernel's four lanes take whole vectors only, ``(a0+a2)+(a1+a3)``, then the tail one by one."""
    rows, count = values.shape
    accumulator = np.zeros((rows, lanes), np.float32)
    whole = count - count % 4 if lanes == 4 else count
    for start in range(0, whole, lanes):
        chunk = values[:, start:start + lanes]
        accumulator[:, :chunk.shape[1]] += chunk
    if lanes == 4:
        total = (accumulator[:, 0] + accumulator[:, 2]) + (accumulator[:, 1] + accumulator[:, 3])
        for index in range(whole, count):
            total += values[:, index]
        return total
    if lanes == 16:  # vextractf64x4 + vaddps: the high eight lanes onto the low eight
        accumulator = accumulator[:, 8:] + accumulator[:, :8]
    pairs = accumulator[:, 0::2] + accumulator[:, 1::2]  # vhaddps: within each 128-bit half
    quads = pairs[:, 0::2] + pairs[:, 1::2]
    return quads[:, 0] + quads[:, 1]


def mlas_softmax(rows: np.ndarray, lanes: int) -> np.ndarray:
    """MlasComputeSoftmax on float32 rows (rows x D): max, sum-exp, then multiplied by ``1.0f / sum``."""
    negative_maximum = -rows.max(axis=1, keepdims=True)
    exps = mlas_sum_exp_values(np.add(rows, negative_maximum, dtype=np.float32), lanes)
    with np.errstate(divide="ignore"):
        scale = np.divide(np.float32(1), mlas_lane_sum(exps, lanes), dtype=np.float32)
    return np.multiply(exps, scale[:, None], dtype=np.float32)


def _host_output(op_type: str, x: np.ndarray) -> np.ndarray:
    """The host's onnxruntime CPU EP on one float32 node of ``x`` (one thread)."""
    graph = helper.make_graph([helper.make_node(op_type, ["x"], ["y"])], f"{op_type.lower()}_probe",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return cpu_session(internal_model(graph, 13), threads=1).run(None, {"x": x})[0]


_PROBE_LENGTH = 67  # a 48-element step, a 16-lane vector and a tail of 3, or two 24-element steps and a tail


@functools.lru_cache(maxsize=1)
def host_sum_exp_lanes() -> int:
    """16 where the host's onnxruntime runs MLAS's AVX-512F sum-exp kernel, 8 its FMA3 one, else 4 (SSE2),
    measured once on its Softmax: CPU flags would only guess MLAS's choice."""
    rows = np.random.default_rng(7).normal(0, 4, (64, _PROBE_LENGTH)).astype(np.float32)
    y = _host_output("Softmax", rows)
    return next((lanes for lanes in (16, 8) if np.array_equal(y, mlas_softmax(rows, lanes))), 4)


# Separates the three exp kernels: the FMA3 and SSE2 ones round apart on about one in ten of a ramp
# over the whole range; the AVX-512F one alone gives NaN for +inf and no clamp at 88.78.
_EXP_PROBE = np.concatenate([np.linspace(-110, 100, 2001, dtype=np.float32), np.array([np.inf, -np.inf, 1e30, 3e38], np.float32)])


@functools.lru_cache(maxsize=1)
def host_exp_lanes() -> int:
    """Which MLAS exp kernel the host's onnxruntime Exp runs (onnxruntime 1.32 on an AVX-512F host: the FMA3
    one's bits), measured once on its Exp: 8 (FMA3), 16 (AVX-512F), else 4 (SSE2)."""
    y = _host_output("Exp", _EXP_PROBE)
    with np.errstate(over="ignore", invalid="ignore"):
        return next((lanes for lanes in (8, 16) if np.array_equal(y, mlas_exp(_EXP_PROBE, lanes), equal_nan=True)), 4)
