"""The shared requantize step against hand references: DirectML's correctly rounded value (exact
fractions, ties to even) through all three tiers, and MLAS's float32 formula; each for the numpy
twin and for the compiled kernel (``compiled``)."""

from fractions import Fraction

import numpy as np
import pytest

from dml_ep.numerics.arithmetic import Arithmetic
from dml_ep.numerics.kernels.quantize import Requantizer

DIRECTML, ONNXRUNTIME = Arithmetic("directml"), Arithmetic("onnxruntime", False)


@pytest.fixture(params=[False, pytest.param(True, marks=pytest.mark.compiled)], ids=["twin", "compiled"])
def compiled(request):
    return request.param


def ideal(acc, scale_in, scale_out, zero_point, dtype):
    """clamp(round_half_even(acc * scale_in / scale_out) + zp) in exact fractions."""
    info = np.iinfo(dtype)
    value = Fraction(int(acc)) * Fraction(float(scale_in)) / Fraction(float(scale_out))
    rounded = round(value)  # Python's round of a Fraction: half to even
    return min(max(rounded + int(zero_point), info.min), info.max)


def check_directml(acc, scale_a, scale_b, scale_out, zero_point, dtype, compiled):
    got = Requantizer(scale_a, scale_b, scale_out, zero_point, dtype, DIRECTML, compiled)(acc.copy())
    scale_in = np.float64(np.float32(scale_a)) * np.float64(np.float32(scale_b))
    expected = [ideal(a, scale_in, np.float32(scale_out), zero_point, dtype) for a in acc.reshape(-1)]
    np.testing.assert_array_equal(got.reshape(-1), expected)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_random_values_round_as_exact_fractions(dtype, compiled):
    rng = np.random.default_rng(0)
    acc = rng.integers(-40000, 40000, 5000).astype(np.int32)
    check_directml(acc, np.float32(0.0123), np.float32(0.00731), np.float32(0.0417), 3 if dtype == np.int8 else 128, dtype, compiled)


def test_values_within_float32_error_of_a_half_are_settled_exactly(compiled):
    """acc * ratio lies a hair (1e-6, under the float32 estimate's error) from a half-integer: the
    float32 tier cannot tell, the float64 tier does; exact halves are ties, to even."""
    scale_a, scale_b = np.float32(1.0), np.float32(1.0)
    rng = np.random.default_rng(1)
    acc = np.arange(1, 2001, dtype=np.int32)
    halves = rng.integers(-100, 100, acc.size) + 0.5
    for offset in (1e-6, -1e-6):
        # scale_out with acc / scale_out as close as float32 allows to halves + offset
        scale_out = (acc / (halves + offset)).astype(np.float32)
        for a, so in zip(acc[:400], scale_out[:400]):
            check_directml(np.array([a]), scale_a, scale_b, so, 0, np.int8, compiled)
    ties = np.array([3, 5, -7, 9, 11], np.int32)  # ratio 1/2: exact halves
    check_directml(ties, np.float32(0.5), np.float32(1.0), np.float32(1.0), 0, np.int8, compiled)


def test_sums_laid_out_channels_last_are_settled_exactly_too():
    """A convolution's float32 sums arrive as a view of channels-last memory: the elements the
    float32 tier leaves to the exact one are written back in place (the twin once wrote them into
    a copy, and -5 x 0.1f, -0.50000000745 before rounding, came out 0 instead of -1)."""
    acc = np.array([[-5.0, 3.0, 7.0], [5.0, -15.0, 1.0]], np.float32).T  # not C-contiguous
    got = Requantizer(np.float32(1.0), np.float32(0.1), np.float32(1.0), 0, np.int8, DIRECTML)(acc)
    scale_in = np.float64(np.float32(0.1))
    np.testing.assert_array_equal(got, [[ideal(a, scale_in, np.float32(1.0), 0, np.int8) for a in row] for row in acc])
    assert got[0, 0] == -1


@pytest.mark.parametrize("scale_out", [np.float32(1e-45), np.float32(3e38)])
def test_ratios_beyond_float32_fall_back_to_float64(scale_out, compiled):
    """A ratio that overflows float32, or is subnormal in it, is estimated in float64 throughout."""
    acc = np.array([-3, -1, 0, 1, 2, 10**6], np.int32)
    requantize = Requantizer(np.float32(0.5), np.float32(0.25), scale_out, 0, np.uint8, DIRECTML)
    assert requantize.ratio32 is None
    check_directml(acc, np.float32(0.5), np.float32(0.25), scale_out, 0, np.uint8, compiled)


def test_onnxruntime_arithmetic_is_mlas_float32_formula(compiled):
    rng = np.random.default_rng(2)
    acc = rng.integers(-30000, 30000, (50, 8)).astype(np.int32)
    scale_a, scale_b, scale_out = np.float32(0.02), rng.uniform(0.001, 0.01, 8).astype(np.float32), np.float32(0.3)
    got = Requantizer(scale_a, scale_b, scale_out, 7, np.uint8, ONNXRUNTIME, compiled)(acc.copy())
    multiplier = (scale_a * scale_b) / scale_out  # float32, as MLAS forms it
    expected = np.clip(np.rint(acc.astype(np.float32) * multiplier), -7, 248) + 7
    np.testing.assert_array_equal(got, expected.astype(np.uint8))
