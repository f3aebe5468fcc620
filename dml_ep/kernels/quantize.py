"""The output quantization step shared by the quantized kernels, in both arithmetic modes.

DirectML documents ``Output = clamp(round(value / OutputScale) + OutputZeroPoint, Min, Max)`` with
round-half-to-even. Two ways to evaluate it:

- ``requantize_exact``: the correctly rounded ideal value. The kernels pass a float64 estimate and
  a callback that compares the exact rational value with ``n + 1/2`` using Python integers; only
  elements whose estimate lies within a few float64 ulps of a half-integer are re-checked, so the
  common case is pure numpy and ties (exact halves, frequent with power-of-two scales) round to even.
- ``requantize_onnxruntime``: MLAS's ``MlasRequantizeOutput``: ``float32(acc) * float32 multiplier``,
  clamped to ``[Min - zp, Max - zp]``, rounded half to even by ``cvtps2dq``, plus ``zp``.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

# Relative distance from a half-integer under which the float64 estimate is re-checked exactly.
_TIE_TOLERANCE = 2.0**-44
_BEYOND_8_BITS = 2.0**31


def quant_range(dtype) -> tuple[int, int]:
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def max_abs_code(dtype) -> int:
    """The largest magnitude of a code of an 8-bit type: 255 for uint8, 128 for int8."""
    lo, hi = quant_range(dtype)
    return max(-lo, hi)


def ratio(value) -> tuple[int, int]:
    """A float as an exact integer ratio (numerator, positive denominator)."""
    return Fraction(float(value)).as_integer_ratio()


def ratios(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Element-wise exact integer ratios of a float array, as object arrays of Python ints."""
    flat = np.asarray(values, dtype=np.float64)
    pairs = [ratio(v) for v in flat.reshape(-1)]
    num = np.empty(len(pairs), dtype=object)
    den = np.empty(len(pairs), dtype=object)
    num[:] = [p for p, _ in pairs]
    den[:] = [q for _, q in pairs]
    return num.reshape(flat.shape), den.reshape(flat.shape)


def to_object(array: np.ndarray) -> np.ndarray:
    """Integers (or integral floats) as Python ints, so products cannot overflow."""
    out = np.empty(array.shape, dtype=object)
    out[...] = np.asarray(array, dtype=np.int64).tolist() if array.ndim else int(array)
    return out


def sign(values: np.ndarray) -> np.ndarray:
    """Signs of an object array of Python ints (np.sign would overflow through int64)."""
    return (values > 0).astype(np.int64) - (values < 0).astype(np.int64)


def round_half_even_exact(estimate: np.ndarray, compare_with_half, largest: float | None = None) -> np.ndarray:
    """Round the exact values behind ``estimate`` to the nearest integer, ties to even.

    ``estimate`` is a float64 approximation within a few ulps (relative) of the exact value.
    ``compare_with_half(index, twice_half)`` returns, for the flat indices ``index``, an object
    array of Python ints with the sign of ``2 * exact_value - twice_half`` (``twice_half`` is
    ``2n + 1``, as Python ints): only those elements are computed exactly. Values beyond
    +-2^31 come back as +-2^31: every caller saturates to 8 bits, so their rounding cannot matter.
    ``largest``, a bound on ``|estimate|`` the caller knows, saves two passes.
    """
    if largest is None:
        largest = max(float(np.max(estimate, initial=0.0)), -float(np.min(estimate, initial=0.0)))
    if largest > _BEYOND_8_BITS:
        estimate = np.clip(estimate, -_BEYOND_8_BITS, _BEYOND_8_BITS)
    rounded = np.rint(estimate)
    # Within the estimate's error of a half-integer, the exact value may round either way.
    distance = np.subtract(estimate, rounded)
    np.abs(distance, out=distance)
    suspect = np.flatnonzero(distance >= 0.5 - _TIE_TOLERANCE * max(min(largest, _BEYOND_8_BITS), 1.0))
    if suspect.size:
        n = np.floor(estimate.reshape(-1)[suspect])
        direction = sign(compare_with_half(suspect, to_object(2 * n + 1)))
        tie_value = np.where(np.mod(n, 2) == 0, n, n + 1)
        rounded.reshape(-1)[suspect] = np.where(direction > 0, n + 1, np.where(direction < 0, n, tie_value))
    return rounded


def requantize_product_exact(acc: np.ndarray, scale_in: np.ndarray, scale_out: np.ndarray, zero_point, dtype) -> np.ndarray:
    """``clamp(round(acc * scale_in / scale_out) + zp)`` correctly rounded, ties to even.

    ``acc`` holds exact integers; ``scale_in`` is a float64 array (a product of two float32
    scales, which float64 holds exactly) and ``scale_out`` a float array, both broadcastable to
    ``acc``. This is DirectML's quantized convolution / matrix multiply output. Estimates beyond
    the output range, clamped to one step outside it first, saturate whatever their rounding.
    """
    lo, hi = quant_range(dtype)
    zero_point = np.asarray(zero_point, dtype=np.float64)
    scale_in = np.asarray(scale_in, dtype=np.float64)
    scale_out = np.asarray(scale_out, dtype=np.float64)
    estimate = np.multiply(acc, scale_in / scale_out, dtype=np.float64)
    np.clip(estimate, lo - 1 - zero_point, hi + 1 - zero_point, out=estimate)
    largest = float(max(hi + 1 - zero_point.min(initial=0), zero_point.max(initial=0) + 1 - lo))

    def compare_with_half(index, twice_half):
        in_num, in_den = ratios(scale_in)
        out_num, out_den = ratios(scale_out)
        where = np.unravel_index(index, estimate.shape)

        def pick(table):
            return np.broadcast_to(table, estimate.shape)[where]

        # (2 * acc * scale_in / scale_out - twice_half) times in_den * out_num, which is positive.
        exact_acc = to_object(pick(acc))
        return 2 * exact_acc * pick(in_num) * pick(out_den) - twice_half * pick(in_den) * pick(out_num)

    return saturate(round_half_even_exact(estimate, compare_with_half, largest), zero_point, dtype)


def saturate(rounded: np.ndarray, zero_point, dtype) -> np.ndarray:
    """``clamp(rounded + zero_point, Min, Max)`` in the output type (``rounded`` may be overwritten)."""
    lo, hi = quant_range(dtype)
    shifted = np.add(rounded, zero_point, out=rounded if rounded.dtype == np.float64 and rounded.flags.writeable
                     and np.shape(zero_point) in ((), rounded.shape) else None, dtype=np.float64)
    np.clip(shifted, lo, hi, out=shifted)
    return shifted.astype(dtype)


def requantize_onnxruntime(acc: np.ndarray, multiplier, zero_point, dtype) -> np.ndarray:
    """MLAS's ``MlasRequantizeOutput`` on exact integer accumulators (any float or int array; a
    writeable float32 one is scaled in place).

    ``multiplier`` is the float32 ``scale_in / scale_out`` (broadcastable); ``zero_point`` too.
    At most four passes: scale, clamp, round and shift into the output type. Clamping before
    rounding gives what rounding first would, the bounds being integers.
    """
    lo, hi = quant_range(dtype)
    zero_point = np.asarray(zero_point, dtype=np.float32)
    multiplier = np.asarray(multiplier, dtype=np.float32)
    in_place = acc.dtype == np.float32 and acc.flags.writeable and acc.shape == np.broadcast_shapes(acc.shape, multiplier.shape)
    scaled = np.multiply(acc, multiplier, out=acc if in_place else None, dtype=np.float32)
    np.clip(scaled, lo - zero_point, hi - zero_point, out=scaled)
    np.rint(scaled, out=scaled)
    if zero_point.any():
        scaled += zero_point
    return scaled.astype(dtype)


class Requantizer:
    """The output step shared by the quantized products: ``acc * scale_a * scale_b / scale_out``
    quantized, in one arithmetic, its parameters worked out once per node.

    ``acc`` holds the integer core's exact sums (bias included; int32, or float32 when they are
    exact in it; a float32 ``acc`` may be overwritten). The scales (float32) and the zero point
    broadcast to ``acc``. onnxruntime: MLAS, ``float32(acc)`` times the float32 multiplier
    ``float32(scale_a * scale_b) / scale_out``; DirectML: the correctly rounded ideal value.
    """

    def __init__(self, scale_a, scale_b, scale_out, zero_point, dtype, arithmetic):
        scale_a, scale_b, scale_out = (np.asarray(s, dtype=np.float32) for s in (scale_a, scale_b, scale_out))
        self.zero_point, self.dtype, self.onnxruntime = zero_point, dtype, arithmetic.onnxruntime
        if self.onnxruntime:
            with np.errstate(over="ignore"):  # extreme scales overflow to inf in float32, as in MLAS
                self.multiplier = (scale_a * scale_b) / scale_out
        else:
            self.scale_in, self.scale_out = scale_a.astype(np.float64) * scale_b.astype(np.float64), scale_out

    def __call__(self, acc: np.ndarray) -> np.ndarray:
        if self.onnxruntime:
            return requantize_onnxruntime(acc, self.multiplier, self.zero_point, self.dtype)
        return requantize_product_exact(acc, self.scale_in, self.scale_out, self.zero_point, self.dtype)
