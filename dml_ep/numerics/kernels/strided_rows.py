"""Inputs read through their strides as rows of a span, for the compiled element-wise kernels:
the longest run of innermost axes along which every input moves by a fixed step (0 where it is
broadcast, 1 where it is dense), and each row's first element in each input. A dense add of two
channels-last tensors is one row; a bias broadcast over a [B, S, H] tensor is B*S rows of H.
"""

from __future__ import annotations

import numpy as np


def strided_rows(shape: tuple[int, ...], *strides: tuple[int, ...]) -> tuple[int, list[int], list[np.ndarray]]:
    """``(span, steps, rows)`` for arrays of ``shape`` with these strides (elements, not negative):
    each array's element ``r, i`` of the walk is at ``rows[k][r] + i * steps[k]``, output rows
    following each other."""
    kept = [axis for axis, size in enumerate(shape) if size != 1]
    steps = [each[kept[-1]] if kept else 0 for each in strides]
    span, outer = 1, list(kept)
    while outer and all(each[outer[-1]] == step * span for each, step in zip(strides, steps)):
        span *= shape[outer.pop()]
    rows = [np.zeros(1, np.int64) for _ in strides]
    for axis in outer:
        positions = np.arange(shape[axis], dtype=np.int64)
        rows = [(row[:, None] + positions * each[axis]).reshape(-1) for row, each in zip(rows, strides)]
    return span, steps, rows


def address(x: np.ndarray) -> int:
    """The address of an array's first element, for a compiled kernel that walks it by offsets."""
    return x.__array_interface__["data"][0]
