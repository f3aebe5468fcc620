"""QLinearMatMul: dml_ep against onnxruntime's CPU EP, and "directml" against the exact ideal value.

The exact accumulator is numpy's int64 matmul of the centred codes; the ideal value
``acc * as * bs[n] / ys`` is a ratio of Python integers.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import dml_ep
from onnx_builders import Feed, assert_onnxruntime_mode_exact, check_directml_mode, objects, qlinear_matmul, run_dml, run_ort

pytestmark = pytest.mark.host_sensitive  # every test compares with the host's onnxruntime (tests/host_sensitivity.py)

# Two rounded scale operations and one rounded product: within 3 float32 ulps; 2^-21 leaves a margin.
FLOAT32_RELATIVE_ERROR = 2.0**-21


def matmul_case(a_shape, b_shape, a_dtype=np.uint8, b_dtype=np.int8, per_column=False, b_constant=True, scales=None, y_zp=None, seed=0):
    """A QLinearMatMul model with random full-range codes, and its exact ideal output.

    Returns (model, feeds, num, den, y_zp, error bound, y dtype); the output type is A's.
    """
    rng = np.random.default_rng(seed)
    a_info, b_info = np.iinfo(a_dtype), np.iinfo(b_dtype)
    a = rng.integers(a_info.min, a_info.max + 1, a_shape).astype(a_dtype)
    b = rng.integers(b_info.min, b_info.max + 1, b_shape).astype(b_dtype)
    n = b_shape[-1] if len(b_shape) > 1 else 1
    a_zp = a_dtype(rng.integers(a_info.min, a_info.max + 1))
    # onnxruntime takes per-column parameters as B's shape with K = 1 (the same for every batch here)
    per_column_shape = tuple(b_shape[:-2]) + (1, n)
    b_zp = rng.integers(b_info.min, b_info.max + 1, (1, n) if per_column else ()).astype(b_dtype)
    b_zp = np.ascontiguousarray(np.broadcast_to(b_zp, per_column_shape)) if per_column else b_zp
    acc = np.matmul(a.astype(np.int64) - int(a_zp), b.astype(np.int64) - b_zp.astype(np.int64))
    a_scale, b_scale, y_scale = scales or (np.float32(0.03), np.float32(0.007), None)
    b_scales = (b_scale * rng.uniform(0.5, 2.0, (1, n))).astype(np.float32) if per_column else np.float32(b_scale)
    b_scales = np.ascontiguousarray(np.broadcast_to(b_scales, per_column_shape)) if per_column else b_scales
    if y_scale is None:
        y_scale = np.float32(a_scale * b_scale * max(np.std(acc), 1.0) / 40)
    if y_zp is None:
        y_zp = rng.integers(a_info.min // 2 + a_info.max // 4, a_info.max // 2 + a_info.max // 4 + 1)
    y_zp = a_dtype(y_zp)
    model, feeds = qlinear_matmul(a, np.float32(a_scale), a_zp, b if b_constant else Feed(b), b_scales, b_zp, np.float32(y_scale), y_zp)

    multipliers = [Fraction(float(a_scale)) * Fraction(float(s)) / Fraction(float(y_scale)) for s in np.reshape(b_scales, -1)[:n]]
    column = (-1,) if len(b_shape) > 1 else ()
    num = objects(acc) * np.array([m.numerator for m in multipliers], dtype=object).reshape(column)
    den = np.array([m.denominator for m in multipliers], dtype=object).reshape(column)
    ideal = np.abs(acc * np.float64(a_scale) * np.reshape(b_scales, -1)[:n].reshape(column).astype(np.float64) / np.float64(y_scale))
    return model, feeds, num, den, y_zp, ideal * FLOAT32_RELATIVE_ERROR + 2.0**-30, np.dtype(a_dtype)


SHAPES = {
    "2d": ((5, 16), (16, 7)),
    "3d": ((2, 4, 9), (2, 9, 3)),
    "4d": ((2, 3, 4, 6), (2, 3, 6, 5)),
    "broadcast-b": ((3, 4, 8), (8, 5)),
    "broadcast-a": ((4, 8), (3, 8, 5)),
    "broadcast-both": ((2, 1, 3, 8), (1, 4, 8, 2)),
    "1d-a": ((12,), (2, 12, 4)),
    "1d-b": ((2, 3, 12), (12,)),
    "1d-both": ((20,), (20,)),
    "long-k": ((3, 1000), (1000, 4)),
}
# onnxruntime registers QLinearMatMul for uint8 A with uint8 or int8 B, and int8 A with int8 B.
TYPES = {"u8s8": (np.uint8, np.int8), "u8u8": (np.uint8, np.uint8), "s8s8": (np.int8, np.int8)}
GRID = [
    pytest.param(dict(a_shape=a, b_shape=b, a_dtype=ta, b_dtype=tb, per_column=per_column), id=f"{name}-{types}{'-per-column' if per_column else ''}")
    for name, (a, b) in SHAPES.items()
    for types, (ta, tb) in TYPES.items()
    for per_column in (False, True)
    if not (per_column and len(b) == 1)  # a 1-D B has one column
]
GRID += [
    pytest.param(dict(a_shape=(2, 3, 8), b_shape=(2, 8, 4), a_dtype=ta, b_dtype=tb, b_constant=False), id=f"runtime-b-{types}")
    for types, (ta, tb) in TYPES.items()
]


def exact_reference(a_dtype) -> str:
    """onnxruntime with exact integer GEMMs (see test_qlinear_conv.exact_reference)."""
    return "ort" if np.dtype(a_dtype) == np.int8 else "ort-exact"


@pytest.mark.parametrize("case", GRID)
def test_onnxruntime_arithmetic_matches_onnxruntime(case):
    model, feeds, *_ = matmul_case(**case)
    assert not dml_ep.InferenceSession(model).plan.fallback_nodes
    assert_onnxruntime_mode_exact(model, feeds)


@pytest.mark.parametrize("case", GRID)
def test_directml_arithmetic_is_the_rounded_ideal(case):
    model, feeds, num, den, y_zp, bound, y_dtype = matmul_case(**case)
    check_directml_mode("QLinearMatMul", model, feeds, num, den, y_zp, bound, exact_reference(y_dtype))


@pytest.mark.parametrize("types", list(TYPES))
def test_ties_round_half_to_even(types):
    """Scales 2^-2 * 2^-3 / 2^-4 make the multiplier 1/2: every odd accumulator is a tie."""
    a_dtype, b_dtype = TYPES[types]
    scales = (np.float32(0.25), np.float32(0.125), np.float32(0.0625))
    model, feeds, num, den, y_zp, bound, y_dtype = matmul_case((16, 1), (1, 8), a_dtype, b_dtype, scales=scales, seed=5)
    ties = ((2 * num) % den == 0) & (((2 * num) // den) % 2 == 1)
    assert np.count_nonzero(ties) > 20
    counts = check_directml_mode("QLinearMatMul", model, feeds, num, den, y_zp, bound, exact_reference(a_dtype))
    assert counts["float rounding"] == 0  # the multiplier 1/2 is exact in float32


@pytest.mark.host_sensitive
@pytest.mark.parametrize("arithmetic, reference", [("directml", "ort-exact"), ("onnxruntime", "ort")])
def test_huge_scale_saturates(arithmetic, reference):
    """A value far beyond the output range (scale 1e30) saturates, as onnxruntime's does."""
    a = np.array([[3, 0]], np.uint8)
    b = np.array([[1], [-1]], np.int8)
    model, feeds = qlinear_matmul(a, np.float32(1e30), np.uint8(1), b, np.float32(1), np.int8(0), np.float32(1), np.uint8(0))
    expected = run_ort(model, feeds, reference)
    np.testing.assert_array_equal(run_dml(model, feeds, arithmetic), expected)
    assert expected.item() == 255  # (3-1)*1 + (0-1)*(-1) = 3, times 1e30
