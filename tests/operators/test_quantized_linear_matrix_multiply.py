"""QLinearMatMul: dml_ep against onnxruntime's CPU EP, and "directml" against the exact ideal value.

The exact accumulator is numpy's int64 matmul of the centred codes; the ideal value
``acc * as * bs[n] / ys`` is a ratio of Python integers.
"""

from __future__ import annotations

import numpy as np
import pytest

import dml_ep
from exact_values import exact_reference
from onnx_builders import assert_onnxruntime_mode_exact, check_directml_mode, qlinear_matmul, run_dml, run_ort
from operator_cases import TYPES, matmul_case

pytestmark = pytest.mark.host_sensitive  # every test compares with the host's onnxruntime (tests/host_sensitivity.py)


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
