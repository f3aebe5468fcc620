"""onnxruntime's uint8 x int8 GEMM on AVX2 without VNNI: pairs of products saturate to int16.

MLAS's U8S8 kernels for AVX2 and AVX512BW use VPMADDUBSW, which multiplies raw uint8 activation
codes by raw int8 weight codes and adds adjacent products (K = 2j, 2j+1) into int16 with
saturation, before the exact int32 zero-point corrections. So onnxruntime's accumulator is the exact
one plus ``sum_j (sat16(p_j) - p_j)`` over the pairs ``p_j = a[2j]*b[2j] + a[2j+1]*b[2j+1]``.

A pair can only saturate when ``255 * (|b0| + |b1|)`` (sign-aware) leaves int16's range, which
few weight pairs do; the correction is evaluated for those (pair, column) candidates only.
A convolution's correction is its GEMM's, on the im2col columns (kernel tap outer, input channel
inner, as MLAS's NHWC im2col orders K); depthwise convolutions use an exact kernel and get none.
"""

from __future__ import annotations

import numpy as np

_INT16_MIN, _INT16_MAX = -32768, 32767


def _candidate_pairs(b: np.ndarray):
    """For B [K, N] (raw int8), the (pair, column) indices whose pair sum could leave int16 range."""
    k = b.shape[0]
    padded = np.zeros((k + k % 2, b.shape[1]), dtype=np.int32)
    padded[:k] = b
    b0, b1 = padded[0::2], padded[1::2]
    high = 255 * (np.maximum(b0, 0) + np.maximum(b1, 0))
    low = 255 * (np.minimum(b0, 0) + np.minimum(b1, 0))
    pair, column = np.nonzero((high > _INT16_MAX) | (low < _INT16_MIN))
    return pair, column, b0[pair, column], b1[pair, column]


def can_saturate(b: np.ndarray) -> bool:
    """Whether any pair of B's raw int8 codes ([..., K, N]) saturates with some uint8 activations."""
    return any(_candidate_pairs(matrix)[0].size for matrix in np.asarray(b).reshape(-1, *b.shape[-2:]))


def _correction(a_pair0: np.ndarray, a_pair1: np.ndarray, b0, b1, column, n: int) -> np.ndarray:
    """sum over candidates of (sat16(p) - p), scattered onto the output columns; shape [..., n]."""
    p = a_pair0 * b0 + a_pair1 * b1
    excess = np.clip(p, _INT16_MIN, _INT16_MAX) - p
    # Scatter-add onto the columns: candidates sorted by column, summed per column with reduceat.
    order = np.argsort(column, kind="stable")
    columns, starts = np.unique(column[order], return_index=True)
    out = np.zeros(excess.shape[:-1] + (n,), dtype=np.float64)
    out[..., columns] = np.add.reduceat(excess[..., order], starts, axis=-1)
    return out


def matmul_correction(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Correction to add to the exact ``a @ b`` (a: [..., M, K] uint8, b: [..., K, N] int8, raw codes).

    ``b`` must be one matrix ([K, N] or broadcast batch dims that are all equal); batch
    broadcasting of A is kept.
    """
    b2 = np.asarray(b).reshape(-1, *b.shape[-2:])
    if not all(np.array_equal(b2[0], other) for other in b2[1:]):
        return sum_batched(a, b)
    pair, column, b0, b1 = _candidate_pairs(b2[0])
    k = a.shape[-1]
    out_shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    if pair.size == 0:
        return np.zeros(out_shape)
    a32 = np.zeros(a.shape[:-1] + (k + k % 2,), dtype=np.int32)
    a32[..., :k] = a
    corr = _correction(a32[..., 2 * pair], a32[..., 2 * pair + 1], b0, b1, column, b.shape[-1])
    return np.broadcast_to(corr, out_shape)


def sum_batched(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The correction when every batch of B differs (activation x activation products)."""
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a_b = np.broadcast_to(a, shape + a.shape[-2:]).reshape(-1, *a.shape[-2:])
    b_b = np.broadcast_to(b, shape + b.shape[-2:]).reshape(-1, *b.shape[-2:])
    out = np.stack([matmul_correction(x, y) for x, y in zip(a_b, b_b)])
    return out.reshape(shape + out.shape[-2:])
