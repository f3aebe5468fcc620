"""onnxruntime's CPU RotaryEmbedding (com.microsoft 1) bit for bit: ``MlasRotaryEmbedOneRow``
(onnxruntime/core/mlas/lib/rotary_embedding.cpp, rotary_embedding_kernel_avx2.cpp), which
contrib_ops/cpu/bert/rotary_embedding.cc calls once per (batch, position, head) row of rotated columns.

For each pair (``real``, ``imag``: the two halves, or adjacent columns ``interleaved``) and its ``cos``,
``sin``, in float32 (float16 widened, the output rounded to nearest even):

- AVX2 hosts (MLAS's RopeDispatch is its AVX2 kernel where it takes the FMA3 kernels too,
  platform.cpp): ``real*cos - imag*sin`` as ``_mm256_fmsub_ps(real, cos, imag*sin)`` and ``real*sin +
  imag*cos`` as ``_mm256_fmadd_ps(real, sin, imag*cos)``: one rounding after the second product's. The
  scalar tail loops, compiled with ``-mfma``, measured against onnxruntime 1.32.0 (x86-64 wheel): the
  halves' tail contracts the same way; the interleaved tail (pairs past the last 16 columns) fuses
  its first pair and rounds each product and the sum of the others.
- Other x86-64 hosts (``MlasRotaryEmbedOneRow_FallBack``, no FMA): each product rounded, then the sum.

A float16 pair's products are exact in float32, so every variant rounds the exact ``real*cos - imag*sin``
once to float32, then to float16.
"""

from __future__ import annotations

import functools

import numpy as np
from onnx import TensorProto, helper

from ...core.graph import internal_model
from ...ort.reference import cpu_session
from .float32_fma import fma32

VECTOR = 16  # columns of the AVX2 interleaved kernel's loop (two __m256 of float32)


def mlas_rotary(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, interleaved: bool, fused: bool) -> np.ndarray:
    """The rotated pairs of ``x`` ([..., 2, h], or [..., h, 2] ``interleaved``) by ``cos``/``sin`` broadcast
    to [..., 1, h] ([..., h, 1]), in ``x``'s layout and type; ``fused``: the host runs MLAS's AVX2 kernel."""
    f32 = np.float32
    axis = -1 if interleaved else -2
    real, imag = (np.take(x, i, axis=axis).astype(f32) for i in (0, 1))
    c, s = (np.take(t, 0, axis=axis).astype(f32) for t in (cos, sin))
    c, s = np.broadcast_to(c, real.shape), np.broadcast_to(s, real.shape)
    if x.dtype == cos.dtype == sin.dtype == np.float16:  # float32 products exact, so one float32 sum is the fma's one rounding
        return np.stack((real * c - imag * s, real * s + imag * c), axis=axis).astype(x.dtype)
    pair = (fma32(real, c, -(imag * s)), fma32(real, s, imag * c))
    if x.dtype == np.float16:  # the products are exact: every variant rounds once
        return np.stack(pair, axis=axis).astype(x.dtype)
    first = real.shape[-1]  # the first pair each product and sum rounds apart: none on AVX2 but in the interleaved tail
    if not fused:
        first = 0
    elif interleaved:
        first = (2 * first) // VECTOR * VECTOR // 2 + 1  # past the vector loop's pairs and the tail's first, fused pair
    if first < real.shape[-1]:
        rest = np.s_[..., first:]
        plain = (real[rest] * c[rest] - imag[rest] * s[rest], real[rest] * s[rest] + imag[rest] * c[rest])
        pair = (np.concatenate([pair[0][..., :first], plain[0]], axis=-1), np.concatenate([pair[1][..., :first], plain[1]], axis=-1))
    return np.stack(pair, axis=axis).astype(x.dtype)


# Float32 pairs whose sums MLAS's AVX2 kernel (one FMA) and its fallback (rounded products) round apart.
_PROBE = np.array([[[-0.9434, -0.7514]]], np.float32)  # one row: real, imag (both outputs round apart)
_PROBE_COS = np.array([[0.3412]], np.float32)
_PROBE_SIN = np.array([[0.2944]], np.float32)


@functools.lru_cache(maxsize=1)
def host_rotary_fused() -> bool:
    """Whether the host's onnxruntime runs MLAS's AVX2 rotary kernel rather than its fallback, measured once on
    its RotaryEmbedding (CPU flags would only guess MLAS's choice)."""
    graph = helper.make_graph(
        [helper.make_node("RotaryEmbedding", ["x", "p", "c", "s"], ["y"], domain="com.microsoft")], "rotary_probe",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2]), helper.make_tensor_value_info("p", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("c", TensorProto.FLOAT, [1, 1], _PROBE_COS.ravel()), helper.make_tensor("s", TensorProto.FLOAT, [1, 1], _PROBE_SIN.ravel())])
    y = cpu_session(internal_model(graph, 21, ("com.microsoft",)), threads=1).run(None, {"x": _PROBE, "p": np.zeros(1, np.int64)})[0]
    pairs = _PROBE.reshape(1, 1, 2, 1)
    return bool(np.array_equal(y.reshape(pairs.shape), mlas_rotary(pairs, _PROBE_COS.reshape(1, 1, 1, 1), _PROBE_SIN.reshape(1, 1, 1, 1), False, True)))
