"""A correctly rounded float32 fused multiply-add for numpy, which has none.

onnxruntime's AVX2 QLinearAdd kernel is two ``_mm256_fmadd_ps``; emulating them with a float32
multiply then add would round twice. Here ``x * y`` is formed exactly in float64 (both are float32,
so 48 significant bits fit), the sum with ``z`` is formed as an exact float64 pair (TwoSum), and the
pair is rounded once to float32: the float64 head rounds correctly except when it sits exactly on a
float32 midpoint, where the tail decides the direction.
"""

from __future__ import annotations

import numpy as np


def fma32(x, y, z) -> np.ndarray:
    """``round_to_float32(x * y + z)`` with a single rounding, element-wise (float32 inputs)."""
    product = np.asarray(x, dtype=np.float64) * np.asarray(y, dtype=np.float64)
    addend = np.asarray(z, dtype=np.float64)
    head = product + addend
    virtual = head - product
    tail = (product - (head - virtual)) + (addend - virtual)
    rounded = head.astype(np.float32)
    neighbour = np.nextafter(rounded, np.where(head > rounded, np.inf, -np.inf).astype(np.float32))
    on_midpoint = (tail != 0) & ((rounded.astype(np.float64) + neighbour.astype(np.float64)) / 2 == head)
    return np.where(on_midpoint, _pick_toward(rounded, neighbour, tail), rounded)


def _pick_toward(rounded: np.ndarray, neighbour: np.ndarray, tail: np.ndarray) -> np.ndarray:
    """Of the two float32 values around a midpoint, the one on the side the tail points to."""
    return np.where(tail > 0, np.maximum(rounded, neighbour), np.minimum(rounded, neighbour))
