"""Exact integer matrix products on float32 BLAS.

numpy's integer matmul has no BLAS behind it (about 100x slower than sgemm here). Products of
8-bit codes are integers of at most 255 * 255 in magnitude; a float32 sum of such terms is exact
while every partial sum stays below 2^24, whatever order BLAS adds them in. So the inner dimension
is cut into blocks whose worst-case sum stays below 2^24, each block is one sgemm, and the blocks
are added in float64 (exact up to 2^53).
"""

from __future__ import annotations

import numpy as np

_FLOAT32_EXACT = 2**24


def block_size(max_abs_a: float, max_abs_b: float) -> int:
    """The longest inner dimension whose dot products are exact in float32."""
    bound = max(float(max_abs_a) * float(max_abs_b), 1.0)
    return max(int(_FLOAT32_EXACT // bound), 1)


def exact_matmul(a: np.ndarray, b: np.ndarray, max_abs_a: float, max_abs_b: float) -> np.ndarray:
    """``a @ b`` (numpy matmul broadcasting) for integer-valued float32 arrays, exactly.

    ``max_abs_a``/``max_abs_b`` bound the magnitudes of the entries. Returns float32 when one
    block suffices (then every entry is an exact integer below 2^24), else float64.
    """
    k = a.shape[-1]
    step = block_size(max_abs_a, max_abs_b)
    if k <= step:
        return np.matmul(a, b)
    total = None
    for start in range(0, k, step):
        part = np.matmul(a[..., start : start + step], b[..., start : start + step, :])
        total = part.astype(np.float64) if total is None else np.add(total, part, out=total)
    return total
