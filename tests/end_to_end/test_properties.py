"""Property tests over the parameter space of the four mapped operators (hypothesis, derandomized).

Each example is checked like the grid tests: arithmetic="onnxruntime" bit for bit against
onnxruntime, arithmetic="directml" against the exact rational ideal, with every difference from
onnxruntime (exact integer GEMMs) explained and counted. Sizes are bounded by a multiply-accumulate
budget so the whole module runs in well under a minute.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx_builders import assert_onnxruntime_mode_exact, check_directml_mode
from exact_values import exact_reference
from operator_cases import (MAC_BUDGET, TYPES, add_case, check_both_modes, conv_case, conv_params, matmul_case, power_of_two,
                            product_scales, scales, seeds, zero_point)
from operator_cases import operands as float_operands

import onnx_builders

pytestmark = pytest.mark.host_sensitive  # every test compares with the host's onnxruntime (tests/host_sensitivity.py)

PROPERTY = settings(derandomize=True, deadline=None, max_examples=150, database=None)


sum_ties = st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 10)).map(
    lambda e: (power_of_two(-e[2] - e[0]), power_of_two(-e[2] - e[1]), power_of_two(-e[2]))  # sa / sc, sb / sc
)
sum_scales = st.one_of(st.tuples(scales, scales, scales), sum_ties)


@PROPERTY
@given(conv_params())
def test_qlinear_conv(params):
    model, feeds, num, den, y_zp, bound, y_dtype = conv_case(**params)
    assert_onnxruntime_mode_exact(model, feeds)
    check_directml_mode("QLinearConv", model, feeds, num, den, y_zp, bound, exact_reference(y_dtype))


@st.composite
def matmul_params(draw):
    types = draw(st.sampled_from(sorted(TYPES)))
    a_dtype, b_dtype = TYPES[types]
    a_rank, b_rank = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    batch = draw(st.lists(st.integers(1, 3), min_size=max(a_rank, b_rank, 2) - 2, max_size=max(a_rank, b_rank, 2) - 2))

    def operand_batch(rank):
        dims = batch[len(batch) - max(rank - 2, 0) :]
        return tuple(d if draw(st.booleans()) else 1 for d in dims)  # a 1 broadcasts

    m, n = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    k = draw(st.integers(1, max(1, min(4096, MAC_BUDGET // (m * n * max(math.prod(batch), 1))))))
    a_shape = (k,) if a_rank == 1 else operand_batch(a_rank) + (m, k)
    b_shape = (k,) if b_rank == 1 else operand_batch(b_rank) + (k, n)
    return dict(
        a_shape=a_shape,
        b_shape=b_shape,
        a_dtype=a_dtype,
        b_dtype=b_dtype,
        # per column for a 2-D B only: onnxruntime wants a batched B's zero point as [..., 1, N]
        per_column=b_rank == 2 and draw(st.booleans()),
        b_constant=draw(st.booleans()),
        scales=draw(product_scales),
        y_zp=draw(zero_point(a_dtype)),
        seed=draw(seeds),
    )


@PROPERTY
@given(matmul_params())
def test_qlinear_matmul(params):
    model, feeds, num, den, y_zp, bound, y_dtype = matmul_case(**params)
    assert_onnxruntime_mode_exact(model, feeds)
    check_directml_mode("QLinearMatMul", model, feeds, num, den, y_zp, bound, exact_reference(y_dtype))


@st.composite
def broadcast_shapes(draw, max_rank):
    """Two shapes broadcasting to one output of rank 1..max_rank: each operand may drop leading
    dimensions and set any dimension to 1."""
    out = draw(st.lists(st.integers(1, 4), min_size=1, max_size=max_rank))

    def operand():
        rank = draw(st.integers(0, len(out)))
        return tuple(d if draw(st.booleans()) else 1 for d in out[len(out) - rank :])

    return operand(), operand()


@PROPERTY
@given(broadcast_shapes(6), st.sampled_from([np.uint8, np.int8]), st.data())
def test_qlinear_add(shapes, dtype, data):
    rng = np.random.default_rng(data.draw(seeds))
    info = np.iinfo(dtype)
    a, b = (rng.integers(info.min, info.max + 1, shape).astype(dtype) for shape in shapes)
    scale_values = data.draw(sum_scales)
    zero_points = tuple(data.draw(zero_point(dtype)) for _ in range(3))
    model, feeds, num, den, zc, bound = add_case(a, b, scale_values, zero_points)
    assert_onnxruntime_mode_exact(model, feeds)
    check_directml_mode("QLinearAdd", model, feeds, num, den, zc, bound)


@settings(derandomize=True, deadline=None, max_examples=100, database=None)
@given(
    broadcast_shapes(8),
    st.sampled_from([np.float32, np.float16]),
    st.sampled_from([(None, {}), ("Relu", {}), ("LeakyRelu", {}), ("LeakyRelu", {"alpha": 0.2})]),
    st.sampled_from(["Add", "Sum"]),
    seeds,
)
def test_add(shapes, dtype, activation, op_type, seed):
    a, b = float_operands(*shapes, dtype, seed)
    name, attributes = activation
    model, feeds = onnx_builders.add(a, b, op_type=op_type, activation=name, **attributes)
    check_both_modes(model, feeds)
