"""fma32 against the exact sum rounded once to float32 (Python fractions, nearest, ties to even),
on random triples and on the cases double rounding gets wrong: sums on a float32 midpoint with a
tail, and sums in float32's subnormal range; and the shapes it returns."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dml_ep.numerics.kernels.float32_fma import fma32


def rounded_once(x, y, z) -> np.float32:
    """``x * y + z`` exactly, then the nearer of its two float32 neighbours (the even one on a tie)."""
    exact = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
    guess = np.float32(float(exact))
    below = guess if Fraction(float(guess)) <= exact else np.nextafter(guess, np.float32(-np.inf))
    above = np.nextafter(below, np.float32(np.inf))
    low, high = exact - Fraction(float(below)), Fraction(float(above)) - exact
    if low != high:
        return below if low < high else above
    return below if int(np.array(below).view(np.uint32)) % 2 == 0 else above


def midpoint_triples(rng, count):
    """z in [1, 2), x * y = +-(2^-24 - 2^-70): the float64 sum drops the 2^-70 onto a float32
    midpoint of z's, where rounding to even goes the wrong way for about half of them."""
    z = rng.uniform(1, 2, count).astype(np.float32)
    x = (rng.choice([-1.0, 1.0], count) * 2.0 ** -12 * (1 + 2.0 ** -23)).astype(np.float32)
    return x, np.full(count, 2.0 ** -12 * (1 - 2.0 ** -23), np.float32), z


@pytest.mark.parametrize("kind", ["random", "midpoint", "subnormal"])
def test_one_rounding(kind):
    rng = np.random.default_rng(3)
    if kind == "random":
        x, y, z = (rng.standard_normal(400).astype(np.float32) for _ in range(3))
    elif kind == "midpoint":
        x, y, z = midpoint_triples(rng, 400)
    else:
        x = (rng.standard_normal(400) * 2.0 ** -70).astype(np.float32)
        y = (rng.standard_normal(400) * 2.0 ** -70).astype(np.float32)
        z = (rng.standard_normal(400) * 2.0 ** -140).astype(np.float32)
        # half on a subnormal midpoint: z + 2^-150 - 2^-196, the float64 sum dropping the 2^-196
        x[:200], y[:200] = np.float32(2.0 ** -75 * (1 + 2.0 ** -23)), np.float32(2.0 ** -75 * (1 - 2.0 ** -23))
        z[:200] = (rng.integers(1, 2 ** 12, 200) * 2.0 ** -149).astype(np.float32)
    out = fma32(x, y, z)
    assert out.dtype == np.float32 and out.shape == x.shape
    expected = np.array([rounded_once(*t) for t in zip(x, y, z)], np.float32)
    np.testing.assert_array_equal(out, expected)


def test_double_rounding_gets_the_midpoint_cases_wrong():
    """float64 then float32 rounds most of the midpoint cases wrongly (else that test could not fail)."""
    x, y, z = midpoint_triples(np.random.default_rng(3), 400)
    twice = (x.astype(np.float64) * y + z).astype(np.float32)
    assert np.mean(twice != fma32(x, y, z)) > 0.3


@pytest.mark.parametrize("shapes, shape", [(((), (), ()), ()), (((3,), (), ()), (3,)), (((), (), (2, 1)), (2, 1)),
                                           (((2, 1), (1, 4), ()), (2, 4)), (((1,), (), ()), (1,))])
def test_the_broadcast_shape(shapes, shape):
    x, y, z = (np.full(s, 1.5, np.float32) if s else np.float32(1.5) for s in shapes)
    out = fma32(x, y, z)
    assert np.shape(out) == shape
    np.testing.assert_array_equal(out, np.full(shape, 3.75, np.float32))
