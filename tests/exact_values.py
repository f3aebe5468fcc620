"""Exact references the operator tests judge dml_ep by, written here independently of dml_ep:
ONNX's convolution padding, the int64 tap-by-tap convolution accumulator, QuantizeLinear's exact
value in Fractions and its float32 value, and which onnxruntime reference computes a quantized product's sums exactly."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np


def resolve_pads(in_spatial, kernel, strides, dilations, pads, auto_pad):
    """ONNX's start and end padding per spatial axis."""
    rank = len(in_spatial)
    if auto_pad in (None, "NOTSET"):
        pads = pads or [0] * 2 * rank
        return pads[:rank], pads[rank:]
    if auto_pad == "VALID":
        return [0] * rank, [0] * rank
    starts, ends = [], []
    for size, k, s, d in zip(in_spatial, kernel, strides, dilations):
        total = max(0, (math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size)
        start = total // 2 if auto_pad == "SAME_UPPER" else (total + 1) // 2
        starts.append(start)
        ends.append(total - start)
    return starts, ends


def exact_accumulator(x, x_zp, w, w_zp, group, strides, dilations, starts, ends) -> np.ndarray:
    """``sum((x - x_zp) * (w - w_zp))`` per output element in int64; padding contributes 0."""
    centred = np.pad(x.astype(np.int64) - int(x_zp), [(0, 0), (0, 0), *zip(starts, ends)])
    filters = w.astype(np.int64) - np.asarray(w_zp, dtype=np.int64).reshape(-1, *[1] * (w.ndim - 1))
    batch, channels = x.shape[:2]
    out_channels, group_channels, *kernel = w.shape
    out_sizes = [(centred.shape[2 + i] - (k - 1) * d - 1) // s + 1 for i, (k, d, s) in enumerate(zip(kernel, dilations, strides))]
    filters = filters.reshape(group, out_channels // group, group_channels, *kernel)
    acc = np.zeros((batch, group, out_channels // group, *out_sizes), dtype=np.int64)
    for tap in np.ndindex(*kernel):
        window = tuple(slice(t * d, t * d + (o - 1) * s + 1, s) for t, d, o, s in zip(tap, dilations, out_sizes, strides))
        pixels = centred[(slice(None), slice(None), *window)].reshape(batch, group, group_channels, -1)
        acc += np.einsum("ngcp,gmc->ngmp", pixels, filters[(..., *tap)]).reshape(acc.shape)
    return acc.reshape(batch, out_channels, *out_sizes)


def exact_quantize(x, scale, zero_point, dtype) -> np.ndarray:
    """``clamp(round_half_even(x / scale) + zp)`` in Fractions; NaN -> qmin."""
    info = np.iinfo(dtype)
    out = []
    x, scale, zero_point = np.broadcast_arrays(x, scale, zero_point)
    for v, s, z in zip(x.reshape(-1), scale.reshape(-1), zero_point.reshape(-1)):
        if np.isnan(v):
            out.append(info.min)
        elif np.isinf(v):
            out.append(info.max if v > 0 else info.min)
        else:
            q = round(Fraction(float(v)) / Fraction(float(s)))  # Python's round: halves to even
            out.append(min(max(q + int(z), info.min), info.max))
    return np.array(out, dtype).reshape(x.shape)


def float32_quantize(x, scale, zero_point, dtype, reciprocal: bool = False) -> np.ndarray:
    """``clamp(round_half_even(x / scale) + zp)`` with ``x / scale`` one IEEE float32 division (or,
    ``reciprocal``, ``x * float32(1 / scale)``, the form a Direct3D device may use); NaN -> qmin."""
    info = np.iinfo(dtype)
    out = []
    x, scale, zero_point = np.broadcast_arrays(np.asarray(x, np.float32), np.asarray(scale, np.float32), zero_point)
    with np.errstate(over="ignore", invalid="ignore"):
        for v, s, z in zip(x.reshape(-1), scale.reshape(-1), zero_point.reshape(-1)):
            q = v * (np.float32(1) / s) if reciprocal else v / s  # numpy float32 scalars: float32 arithmetic
            if np.isnan(q):
                out.append(info.min)
            elif np.isinf(q):
                out.append(info.max if q > 0 else info.min)
            else:
                out.append(min(max(round(float(q)) + int(z), info.min), info.max))  # round(): halves to even
    return np.array(out, dtype).reshape(x.shape)


def exact_reference(x_dtype) -> str:
    """onnxruntime with exact integer GEMMs for this activation type (QLinearConv's x, QLinearMatMul's A).

    "ort-exact" converts int8 weights to uint8, and onnxruntime has no QLinearConv kernel for
    int8 activations with uint8 weights (NOT_IMPLEMENTED); int8 activations use exact kernels on
    x86 anyway, so plain "ort" is exact for them.
    """
    return "ort" if np.dtype(x_dtype) == np.int8 else "ort-exact"
