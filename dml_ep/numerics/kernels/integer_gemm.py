"""Exact integer matrix products on float32 BLAS.

numpy's integer matmul has no BLAS behind it (about 100x slower than sgemm here). Products of
8-bit codes are integers of at most 255 * 255 in magnitude, and a float32 sum of integers is exact
while every partial sum stays below 2^24, whatever order BLAS adds them in. A partial sum of
``sum_k a[k] * b[k]`` is bounded by ``sum_k |a[k]| * |b[k]|``, so the inner dimension is cut into
blocks where that bound stays below 2^24; each block is one sgemm, and blocks are added in float64
(exact up to 2^53). With weights known in advance the bound uses their actual magnitudes, which
usually leaves a single block.
"""

from __future__ import annotations

import numpy as np

FLOAT32_EXACT = float(2**24)


def weight_blocks(weights: np.ndarray, max_abs_x: float) -> list[slice]:
    """K-blocks for ``weights [..., rows, K] @ x [..., K, cols]`` with ``|x| <= max_abs_x``.

    Greedy: each block is as long as every row's ``sum |w| * max_abs_x`` allows.
    """
    k = weights.shape[-1]
    budget = FLOAT32_EXACT / max(max_abs_x, 1.0)
    cumulative = np.cumsum(np.abs(weights.reshape(-1, k)).astype(np.float64), axis=-1)
    blocks, start = [], 0
    while start < k:
        base = cumulative[:, start - 1 : start] if start else 0.0
        row_max = (cumulative[:, start:] - base).max(axis=0)  # nondecreasing along K
        end = start + max(int(np.searchsorted(row_max, budget, side="right")), 1)
        blocks.append(slice(start, end))
        start = end
    return blocks


def exact_matmul(a: np.ndarray, b: np.ndarray, blocks: list[slice]) -> np.ndarray:
    """``a @ b`` (numpy matmul broadcasting) for integer-valued float32 arrays, exactly.

    Returns float32 for a single block (then every entry is an exact integer below 2^24 in
    magnitude), else float64.
    """
    if len(blocks) == 1:
        return np.matmul(a, b)
    first, *rest = blocks
    total = np.matmul(a[..., first], b[..., first, :]).astype(np.float64)
    for block in rest:
        np.add(total, np.matmul(a[..., block], b[..., block, :]), out=total)
    return total
