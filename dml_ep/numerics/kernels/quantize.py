"""The output quantization step shared by the quantized kernels, in both arithmetic modes.

DirectML documents ``Output = clamp(round(value / OutputScale) + OutputZeroPoint, Min, Max)`` with
round-half-to-even. Two ways to evaluate it:

- the correctly rounded ideal value (the "directml" arithmetic of the quantized products, and
  compare's ideals; QuantizeLinear's "directml" is a float32 quotient instead): ``round_half_even_exact`` takes an estimate and a callback
  that compares the exact rational value with ``n + 1/2`` using Python integers, for the elements
  whose estimate lies too close to a half-integer; so the common case is pure numpy and ties
  (exact halves, frequent with power-of-two scales) round to even. The quantized products reach
  it through :class:`Requantizer`, QLinearAdd through its table.
- ``requantize_onnxruntime``: MLAS's ``MlasRequantizeOutput``: ``float32(acc) * float32 multiplier``,
  clamped to ``[Min - zp, Max - zp]``, rounded half to even by ``cvtps2dq``, plus ``zp``.
"""

from __future__ import annotations

import functools
from fractions import Fraction

import numpy as np

from . import compiled as native

# Relative distance from a half-integer under which the float64 estimate is re-checked exactly.
_TIE_TOLERANCE = 2.0**-44
_BEYOND_8_BITS = 2.0**31


@functools.lru_cache(maxsize=None)
def quant_range(dtype) -> tuple[int, int]:
    """The integer type's (Min, Max), cached: ``np.iinfo`` costs microseconds a call, per node and run."""
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


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
        rounded.flat[suspect] = np.where(direction > 0, n + 1, np.where(direction < 0, n, tie_value))
    return rounded


def _requantize_float64(acc, ratio, scale_in, scale_out, zero_point, dtype) -> np.ndarray:
    """The float64 and exact tiers of DirectML's rounding (:class:`Requantizer`): ``acc * ratio``
    correctly rounded; with ``dtype``, clamped and shifted into it (None: the rounded values
    before the zero point and saturation)."""
    estimate = np.multiply(acc, ratio, dtype=np.float64)
    if dtype is not None:
        lo, hi = quant_range(dtype)
        np.clip(estimate, lo - 1 - zero_point, hi + 1 - zero_point, out=estimate)
    largest = float(np.abs(estimate).max(initial=1.0))

    def compare_with_half(index, twice_half):
        in_num, in_den = ratios(scale_in)
        out_num, out_den = ratios(scale_out)
        where = np.unravel_index(index, estimate.shape)

        def pick(table):
            return np.broadcast_to(table, estimate.shape)[where]

        # (2 * acc * scale_in / scale_out - twice_half) times in_den * out_num, which is positive.
        exact_acc = to_object(pick(acc))
        return 2 * exact_acc * pick(in_num) * pick(out_den) - twice_half * pick(in_den) * pick(out_num)

    rounded = round_half_even_exact(estimate, compare_with_half, largest)
    return rounded if dtype is None else saturate(rounded, zero_point, dtype)


def saturate(rounded: np.ndarray, zero_point, dtype) -> np.ndarray:
    """``clamp(rounded + zero_point, Min, Max)`` in the output type. ``rounded`` (integers in a
    float array, which this overwrites) is clamped to ``[Min - zp, Max - zp]`` first, so the
    shift is exact in its own float type."""
    lo, hi = quant_range(dtype)
    zero_point = np.asarray(zero_point, dtype=rounded.dtype)
    np.clip(rounded, lo - zero_point, hi - zero_point, out=rounded)
    if zero_point.any():
        rounded += zero_point
    return rounded.astype(dtype)


# float32 x + 1.5 * 2^23, for |x| <= 2^22, lies in [2^23, 2^24), where float32's ulp is 1: the sum
# is x rounded to an integer, halves to even (cvtps2dq's rounding), and its low byte is that integer's.
_ROUNDING_ADDEND = np.float32(1.5 * 2**23)


def mlas_codes(v: np.ndarray, zero_point, dtype) -> np.ndarray:
    """MLAS's last steps on float32 values ``v`` (overwritten): clamp to ``[Min - zp, Max - zp]``,
    round half to even (cvtps2dq), add ``zp`` as an integer, in the 8-bit output type.

    Three passes: the clamp, one float32 addition that rounds (``_ROUNDING_ADDEND``), and the
    rounded integers' low bytes, to which the zero point is added as a byte (modulo 256: the
    clamped sum is in range). NaN is not handled: its code is ``zp``. A zero point of one element
    is taken as a scalar (the result has ``v``'s shape)."""
    lo, hi = quant_range(dtype)
    zero_point = np.asarray(zero_point)
    if zero_point.size == 1:  # scalars: numpy's per-call cost of small arrays is most of a small tensor's time
        zp = int(zero_point.item())
        low, high, byte = np.float32(lo - zp), np.float32(hi - zp), np.uint8(zp & 0xFF)  # int8 zero points wrap to their bytes
        shift = zp != 0
    else:
        zp = zero_point.astype(np.int32)
        low, high, byte = (lo - zp).astype(np.float32), (hi - zp).astype(np.float32), zp.astype(np.uint8)
        shift = zp.any()
    np.clip(v, low, high, out=v)
    v += _ROUNDING_ADDEND
    codes = v.view(np.int32).astype(np.uint8)
    if shift:
        codes += byte
    return codes.view(dtype)


def requantize_onnxruntime(acc: np.ndarray, multiplier, zero_point, dtype) -> np.ndarray:
    """MLAS's ``MlasRequantizeOutput`` on exact integer accumulators (any float or int array; a
    writeable float32 one is scaled in place).

    ``multiplier`` is the float32 ``scale_in / scale_out`` (broadcastable); ``zero_point`` too.
    The scaling, then :func:`mlas_codes`.
    """
    multiplier = np.asarray(multiplier, dtype=np.float32)
    in_place = acc.dtype == np.float32 and acc.flags.writeable and multiplier.ndim <= acc.ndim and all(
        m in (1, a) for m, a in zip(multiplier.shape[::-1], acc.shape[::-1]))
    scaled = np.multiply(acc, multiplier, out=acc if in_place else None, dtype=np.float32)
    return mlas_codes(scaled, zero_point, dtype)


class Requantizer:
    """The output step shared by the quantized products: ``acc * scale_a * scale_b / scale_out``
    quantized, in one arithmetic, its parameters worked out once per node.

    ``acc`` holds the integer core's exact sums (int32, or float32 when they are exact in it; a
    float32 ``acc`` may be overwritten), to which a call adds ``bias`` (int32, along the last axis)
    first: the compiled kernels in the same pass. The scales (float32) and the zero point
    broadcast to ``acc``. onnxruntime: MLAS, ``float32(acc + bias)`` times the float32 multiplier
    ``float32(scale_a * scale_b) / scale_out``.

    DirectML: the correctly rounded ideal value, in three tiers, each for the elements the one
    before cannot settle: a float32 estimate (relative error under 2^-21 while the ratio is a
    normal float32: 4.6e-5 within the output range), rounded where it lies more than 2^-12 from a
    half-integer; a float64 estimate; exact integers (ties). Outside the output range the
    estimate's error does not matter: those values saturate whatever their rounding.
    """

    def __init__(self, scale_a, scale_b, scale_out, zero_point, dtype, arithmetic, compiled: bool = False):
        scale_a, scale_b, scale_out = (np.asarray(s, dtype=np.float32) for s in (scale_a, scale_b, scale_out))
        self.zero_point, self.dtype, self.onnxruntime = zero_point, dtype, arithmetic.onnxruntime
        self.compiled = compiled and native.requantize is not None
        self._columns: dict[tuple[int, int], tuple | None] = {}
        self._bias_rows: dict[tuple[int, int], tuple] = {}
        with np.errstate(over="ignore"):  # extreme scales overflow to inf in float32, as in MLAS
            self.multiplier = (scale_a * scale_b) / scale_out
        self.scale_in, self.scale_out = scale_a.astype(np.float64) * scale_b.astype(np.float64), scale_out
        self.ratio = self.scale_in / scale_out.astype(np.float64)
        with np.errstate(over="ignore"):
            ratio32 = self.ratio.astype(np.float32)
        normal = np.isfinite(ratio32) & ((np.abs(ratio32) >= np.finfo(np.float32).tiny) | (self.ratio == 0))
        self.ratio32 = ratio32 if np.all(normal) else None

    def __call__(self, acc: np.ndarray, bias: np.ndarray | None = None, out: np.ndarray | None = None) -> np.ndarray:
        """The codes, in ``out`` if given (``acc``'s shape, the output type; the compiled kernels
        write into a C-contiguous one, the twin's codes are copied into any other)."""
        writable = out is None or out.flags.c_contiguous
        if self.compiled and acc.dtype in _COMPILED_SUMS and acc.flags.c_contiguous and acc.ndim and writable and (
                bias is None or acc.dtype == np.int32):
            columns = acc.shape[-1]
            fold = folded_rows(acc.size // columns if columns else 0, columns)
            parameters = self.along_columns(columns, fold)
            if parameters is not None:
                return self._compiled(acc, parameters, bias, fold, np.empty(acc.shape, self.dtype) if out is None else out)
        codes = self._twin(acc, bias)
        if out is None:
            return codes
        out[...] = codes
        return out

    def _twin(self, acc: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
        """The numpy twin of the compiled kernels."""
        if bias is not None:  # as the kernels add it (int32: exact, float32: the sums are exact below 2^24)
            acc = np.add(acc, bias, dtype=np.int64 if acc.dtype.kind in "iu" else np.float64)
        if self.onnxruntime:
            return requantize_onnxruntime(acc, self.multiplier, self.zero_point, self.dtype)
        if self.ratio32 is None:
            return _requantize_float64(acc, self.ratio, self.scale_in, self.scale_out, self.zero_point, self.dtype)
        estimate = np.multiply(acc, self.ratio32, dtype=np.float32)
        rounded = np.rint(estimate)
        distance = np.subtract(estimate, rounded, out=estimate)
        np.abs(distance, out=distance)
        suspect = np.flatnonzero(distance >= 0.5 - _FLOAT32_MARGIN)
        if suspect.size:
            where = np.unravel_index(suspect, rounded.shape)

            def at(array):
                return np.broadcast_to(array, rounded.shape)[where]

            rounded.flat[suspect] = _requantize_float64(at(acc), at(self.ratio), at(self.scale_in), at(self.scale_out), 0, None)
        return saturate(rounded, self.zero_point, self.dtype)

    def along_columns(self, columns: int, fold: int = 1) -> tuple | None:
        """The parameters as one value per column of the sums, for the compiled kernels, repeated
        for ``fold`` rows taken as one (made once per column count and fold); None where one
        varies along another axis."""
        if (columns, fold) not in self._columns and fold > 1:
            single = self.along_columns(columns)
            self._columns[columns, fold] = None if single is None else tuple(_repeated(p, fold) for p in single)
        if (columns, fold) not in self._columns:
            lo, hi = quant_range(self.dtype)
            zero_point = per_column(self.zero_point, columns, np.float64)
            source = self.multiplier if self.onnxruntime else self.ratio32  # None: a ratio beyond float32's normals
            multiplier = None if source is None else per_column(source, columns, np.float32)
            made: tuple | None = None
            if multiplier is not None and zero_point is not None:
                made = (multiplier, (lo - zero_point).astype(np.float32), (hi - zero_point).astype(np.float32),
                        zero_point.astype(np.int64).astype(np.uint8))
            if not self.onnxruntime and made is not None:  # the float64 and exact tiers' parameters
                each = [per_column(p, columns, np.float64) for p in (self.ratio, self.scale_in, self.scale_out)]
                made = None if any(p is None for p in each) else (*made, *each, zero_point)
            self._columns[columns, fold] = made
        return self._columns[columns, fold]

    def _bias_row(self, bias: np.ndarray | None, columns: int, fold: int) -> np.ndarray:
        """``bias`` (None: zeros) along a folded row, as the kernels add it; kept while the
        caller passes the same array (a constant bias is one array for the node's life; making
        the row costs more than the kernel on a small product)."""
        kept = self._bias_rows.get((columns, fold))
        if kept is not None and kept[0] is bias:
            return kept[1]
        row = np.zeros(columns * fold, np.int32) if bias is None else _repeated(np.broadcast_to(bias, (columns,)).astype(np.int32), fold)
        self._bias_rows[columns, fold] = (bias, row)
        return row

    def _compiled(self, acc: np.ndarray, parameters: tuple, bias: np.ndarray | None, fold: int, codes: np.ndarray) -> np.ndarray:
        """The compiled requantize step (``kernels.compiled.requantize``) into ``codes``, on
        [rows, columns] views, ``fold`` rows taken as one (:func:`folded_rows`)."""
        sums = acc.reshape(-1, acc.shape[-1] * fold)
        add = self._bias_row(bias, acc.shape[-1], fold)
        out = codes.view(np.uint8).reshape(sums.shape)
        if self.onnxruntime:
            native.requantize.mlas(sums, add, *parameters, out)
            return codes
        *float32_tier, ratio, scale_in, scale_out, zero_point = parameters
        suspects = native.flagged(native.requantize.directml, sums.size, sums, add, *float32_tier, ratio, out)
        if suspects.size:  # the exact tier, as the twin settles them
            rows, columns = np.divmod(suspects, sums.shape[1])
            exact = _requantize_float64(sums[rows, columns].astype(np.int64) + add[columns], ratio[columns], scale_in[columns],
                                        scale_out[columns], 0, None)
            out[rows, columns] = saturate(exact, zero_point[columns], self.dtype).view(np.uint8)
        return codes


def _repeated(row: np.ndarray, times: int) -> np.ndarray:
    """``row`` (1-D) repeated end to end: ``np.tile(row, times)`` in a quarter of its time (a
    small node's requantize step makes eight)."""
    return row[np.newaxis].repeat(times, 0).reshape(-1)


FOLD_WIDTH = 256  # the compiled requantize step's rows are made at least this wide where they can be


def folded_rows(rows: int, columns: int) -> int:
    """How many rows of a C-contiguous [rows, columns] the compiled requantize step takes as one
    row (a power of two dividing ``rows``): its loops run along a row, and a narrow one costs
    more than its elements (measured on AVX-512: 12544x16 0.86 ns per element, folded 16 rows
    at a time 0.12; 3136x144 0.26, two at a time 0.15)."""
    fold = 1
    while 0 < columns * fold < FOLD_WIDTH and rows % (2 * fold) == 0:
        fold *= 2
    return fold


def per_column(parameter, columns: int, dtype) -> np.ndarray | None:
    """A scalar or per-column parameter (any leading 1s, or a view broadcasting one row: strides
    of 0) as one contiguous value per column; None for one that varies along another axis."""
    values = np.asarray(parameter)
    if values.size == 1:
        return np.full(columns, values.reshape(-1)[0], dtype)
    leading = zip(values.shape[:-1], values.strides[:-1])
    if values.ndim and values.shape[-1] == columns and all(size == 1 or stride == 0 for size, stride in leading):
        return np.ascontiguousarray(values[(0,) * (values.ndim - 1)], dtype)
    return None


_COMPILED_SUMS = (np.dtype(np.int32), np.dtype(np.float32))
_FLOAT32_MARGIN = 2.0**-12  # > 5x the float32 estimate's error within the output range (|value| <= 257)
