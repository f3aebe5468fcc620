"""MLAS's rotary embedding row kernel in numpy (``dml_ep/numerics/kernels/rotary_embedding.py``): bit for bit with
the host's onnxruntime RotaryEmbedding in float32 (FMA or not, the interleaved tail's measured mix included) and
float16."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dml_ep.numerics.kernels.rotary_embedding import _PROBE, _PROBE_COS, _PROBE_SIN, host_rotary_fused, mlas_rotary
from dml_ep.ort.reference import cpu_session
from onnx_builders import Feed, single_node_model


def onnxruntime_and_mine(dtype, head_size, interleaved, seed=0):
    """One head per row, 128 positions, each its own cache row: onnxruntime's output and ``mlas_rotary``'s."""
    rng = np.random.default_rng(seed)
    half, rows = head_size // 2, 128
    x = rng.standard_normal((1, rows, head_size)).astype(dtype)
    cos, sin = rng.uniform(-1, 1, (rows, half)).astype(dtype), rng.uniform(-1, 1, (rows, half)).astype(dtype)
    model, feeds = single_node_model("RotaryEmbedding", [Feed(x), Feed(np.arange(rows, dtype=np.int64)[None]), cos, sin], dtype, 3,
                                     domain="com.microsoft", interleaved=interleaved)
    expected = cpu_session(model, threads=1).run(None, feeds)[0]
    pairs = (1, rows, half, 2) if interleaved else (1, rows, 2, half)
    caches = [(t[None, :, :, None] if interleaved else t[None, :, None, :]) for t in (cos, sin)]
    mine = mlas_rotary(x.reshape(pairs), *caches, bool(interleaved), host_rotary_fused()).reshape(x.shape)
    return expected, mine


@pytest.mark.host_sensitive
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("head_size", [4, 8, 12, 20, 24, 40, 64, 72])  # the AVX2 loops' whole vectors and tails
def test_bit_for_bit_with_onnxruntime(dtype, interleaved, head_size):
    expected, mine = onnxruntime_and_mine(dtype, head_size, interleaved)
    np.testing.assert_array_equal(mine, expected)


def test_the_probe_tells_the_fused_kernel_from_the_fallback():
    pairs, cos, sin = _PROBE.reshape(1, 1, 2, 1), _PROBE_COS.reshape(1, 1, 1, 1), _PROBE_SIN.reshape(1, 1, 1, 1)
    fused, fallback = (mlas_rotary(pairs, cos, sin, False, f) for f in (True, False))
    assert np.all(fused != fallback)


def test_float16_rounds_the_exact_value_once_in_every_variant():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 5, 2, 20)).astype(np.float16)
    cos, sin = rng.uniform(-1, 1, (2, 3, 5, 1, 20)).astype(np.float16)
    real, imag, c, s = (v.astype(np.float64) for v in (x[..., 0, :], x[..., 1, :], cos[..., 0, :], sin[..., 0, :]))
    exact = np.stack([real * c - imag * s, real * s + imag * c], -2).astype(np.float32).astype(np.float16)
    for fused in (True, False):
        np.testing.assert_array_equal(mlas_rotary(x, cos, sin, False, fused), exact)



def float32_then_float16(value: Fraction) -> np.float16:
    """``value`` rounded to the nearer float32 (the even one on a tie, settled exactly), then to float16."""
    guess = np.float32(float(value))
    below = guess if Fraction(float(guess)) <= value else np.nextafter(guess, np.float32(-np.inf))
    above = np.nextafter(below, np.float32(np.inf))
    low, high = value - Fraction(float(below)), Fraction(float(above)) - value
    even = below if int(np.array(below).view(np.uint32)) % 2 == 0 else above
    return np.float16(below if low < high else above if high < low else even)


def test_float16_over_its_whole_range_is_the_exact_value_rounded_to_float32_then_float16():
    """Pairs, cos and sin spread over float16's exponents (subnormal to 2^15), where a float64 sum could
    round: the exact value (fractions) rounded to float32, then to float16."""
    rng = np.random.default_rng(6)
    x, cos, sin = ((rng.choice([-1, 1], shape) * rng.uniform(1, 2, shape) * 2.0 ** rng.integers(-24, 15, shape)).astype(np.float16)
                   for shape in ((50, 2, 8), (50, 1, 8), (50, 1, 8)))
    f = [[[Fraction(float(v)) for v in row] for row in pair] for pair in (x[:, 0], x[:, 1], cos[:, 0], sin[:, 0])]
    with np.errstate(over="ignore"):  # past float16's range: infinity
        expected = np.array([[[float32_then_float16(r * c - i * s) for r, i, c, s in zip(*(t[n] for t in f))],
                              [float32_then_float16(r * s + i * c) for r, i, c, s in zip(*(t[n] for t in f))]] for n in range(50)], np.float16)
        for fused in (True, False):
            np.testing.assert_array_equal(mlas_rotary(x, cos, sin, False, fused), expected)
