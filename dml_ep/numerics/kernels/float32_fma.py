"""Correctly rounded float32 results for numpy, which rounds only through float64: a fused
multiply-add, and an exact dyadic value rounded once.

onnxruntime's AVX2 QLinearAdd kernel is two ``_mm256_fmadd_ps``; emulating them with a float32
multiply then add would round twice. Here ``x * y`` is formed exactly in float64 (both are float32,
so 48 significant bits fit), the sum with ``z`` is formed as an exact float64 pair (TwoSum), and the
pair is rounded once to float32: the float64 head rounds correctly except when it sits exactly on a
float32 midpoint, where the tail decides the direction.
"""

from __future__ import annotations

import numpy as np


# A float64 exactly halfway between two float32 values ends, below the float32 mantissa, in the
# bits 1000...0: bit 28 set, bits 0-27 clear (float32 keeps 23 of float64's 52 mantissa bits).
BELOW_FLOAT32 = np.uint64((1 << 29) - 1)
HALFWAY = np.uint64(1 << 28)
_SMALLEST_NORMAL32 = float(np.finfo(np.float32).tiny)


def fma32(x, y, z) -> np.ndarray:
    """``round_to_float32(x * y + z)`` with a single rounding, element-wise (float32 inputs)."""
    product = np.atleast_1d(np.multiply(x, y, dtype=np.float64))
    head = np.add(product, z, dtype=np.float64)
    rounded = head.astype(np.float32)
    # Double rounding can only go wrong where the float64 sum sits on a float32 midpoint (or in
    # float32's subnormal range, where the midpoint bits sit elsewhere); fix those few exactly.
    suspect = (head.view(np.uint64) & BELOW_FLOAT32) == HALFWAY
    suspect |= (np.abs(head) < _SMALLEST_NORMAL32) & (head != 0)
    if suspect.any():  # the method: np.any's dispatch costs more than the test on small arrays
        index = np.nonzero(suspect)
        p = np.broadcast_to(product, head.shape)[index]
        h = head[index]
        addend = np.broadcast_to(np.asarray(z, dtype=np.float64), head.shape)[index]
        virtual = h - p
        tail = (p - (h - virtual)) + (addend - virtual)  # TwoSum: h + tail == p + addend exactly
        near = rounded[index]
        neighbour = np.nextafter(near, np.where(h > near, np.inf, -np.inf).astype(np.float32))
        on_midpoint = (tail != 0) & ((near.astype(np.float64) + neighbour) / 2 == h)
        toward_tail = np.where(tail > 0, np.maximum(near, neighbour), np.minimum(near, neighbour))
        rounded[index] = np.where(on_midpoint, toward_tail, near)
    if rounded.ndim == 1 and not (np.ndim(x) or np.ndim(y) or np.ndim(z)):  # three scalars: atleast_1d's axis off
        return rounded.reshape(())
    return rounded  # any array among them: the sum's shape is the broadcast one


def float32_of_dyadic(numerator: int, exponent: int) -> np.float32:
    """``numerator * 2**exponent`` (exact Python integers: any sum of products of floats is such a
    value) rounded once to float32, halves to even, subnormals and overflow to infinity included."""
    if numerator == 0:
        return np.float32(0.0)
    magnitude = abs(numerator)
    quantum = max(magnitude.bit_length() - 24, -149 - exponent)  # keep 24 bits, or the subnormal quantum 2^-149
    if quantum > 0:
        kept, rest = divmod(magnitude, 1 << quantum)
        half = 1 << (quantum - 1)
        if rest > half or (rest == half and kept & 1):
            kept += 1
        magnitude, exponent = kept, exponent + quantum
    with np.errstate(over="ignore"):  # beyond float32's range: infinity
        value = np.float32(np.ldexp(float(magnitude), exponent))
    return -value if numerator < 0 else value


def dyadic(value: float) -> tuple[int, int]:
    """A float's value as ``numerator * 2**exponent`` with an integer numerator."""
    mantissa, exponent = np.frexp(np.float64(value))
    return int(np.ldexp(mantissa, 53)), int(exponent) - 53
