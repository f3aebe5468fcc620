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
from operators.test_element_wise_add1 import check_both_modes
from operators.test_element_wise_add1 import operands as float_operands
from operators.test_element_wise_quantized_linear_add import add_case
from operators.test_quantized_linear_convolution import TYPES as CONV_TYPES
from operators.test_quantized_linear_convolution import conv_case
from operators.test_quantized_linear_convolution import exact_reference as conv_reference
from operators.test_quantized_linear_matrix_multiply import TYPES as MATMUL_TYPES
from operators.test_quantized_linear_matrix_multiply import exact_reference as matmul_reference
from operators.test_quantized_linear_matrix_multiply import matmul_case

import onnx_builders

pytestmark = pytest.mark.host_sensitive  # every test compares with the host's onnxruntime (tests/host_sensitivity.py)

MAC_BUDGET = 200_000
PROPERTY = settings(derandomize=True, deadline=None, max_examples=150, database=None)

scales = st.floats(-4, 1).map(lambda exponent: np.float32(10.0**exponent))  # 1e-4 .. 1e1
seeds = st.integers(0, 2**16)


def power_of_two(exponent) -> np.float32:
    return np.float32(2.0**exponent)


# Scale triples whose exact ratio is 2^-1 .. 2^-3, so that many ideal values are exact ties.
product_ties = st.tuples(st.integers(0, 8), st.integers(0, 8), st.integers(1, 3)).map(
    lambda e: (power_of_two(-e[0]), power_of_two(-e[1]), power_of_two(e[2] - e[0] - e[1]))  # xs * ws / ys
)
sum_ties = st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 10)).map(
    lambda e: (power_of_two(-e[2] - e[0]), power_of_two(-e[2] - e[1]), power_of_two(-e[2]))  # sa / sc, sb / sc
)
product_scales = st.one_of(st.tuples(scales, scales, scales), product_ties)
sum_scales = st.one_of(st.tuples(scales, scales, scales), sum_ties)


def zero_point(dtype):
    info = np.iinfo(dtype)
    return st.integers(int(info.min), int(info.max))


@st.composite
def conv_params(draw):
    types = draw(st.sampled_from(sorted(CONV_TYPES)))
    x_dtype, w_dtype = CONV_TYPES[types]
    spatial = draw(st.sampled_from([1, 2]))
    kind = draw(st.sampled_from(["dense", "depthwise", "grouped"]))
    if kind == "dense":
        group, group_channels, per_group = 1, draw(st.integers(1, 64)), draw(st.integers(1, 64))
    elif kind == "depthwise":
        group, group_channels, per_group = draw(st.integers(1, 64)), 1, draw(st.sampled_from([1, 1, 2]))
    else:
        group = draw(st.integers(2, 8))
        group_channels, per_group = draw(st.integers(1, 64 // group)), draw(st.integers(1, 8))
    kernel = draw(st.lists(st.integers(1, 7), min_size=spatial, max_size=spatial))
    strides = draw(st.lists(st.integers(1, 3), min_size=spatial, max_size=spatial))
    dilations = draw(st.lists(st.integers(1, 3), min_size=spatial, max_size=spatial))
    # onnxruntime refuses dilations with SAME_UPPER/SAME_LOWER ("Dilation not supported").
    auto_pads = [None, None, "VALID"] + (["SAME_UPPER", "SAME_LOWER"] if dilations == [1] * spatial else [])
    auto_pad = draw(st.sampled_from(auto_pads))
    pads = draw(st.lists(st.integers(0, 3), min_size=2 * spatial, max_size=2 * spatial)) if auto_pad is None else None
    batch = draw(st.integers(1, 3))
    out_channels = group * per_group
    # Spatial sizes under the MAC budget, never smaller than the padded dilated kernel needs.
    per_pixel = batch * out_channels * group_channels * math.prod(kernel)
    pixels = max(MAC_BUDGET // per_pixel, 1)
    side = max(int(pixels ** (1 / spatial)), 1)
    sizes = []
    for axis in range(spatial):
        span = (kernel[axis] - 1) * dilations[axis] + 1
        padding = 0 if pads is None else pads[axis] + pads[axis + spatial]
        smallest = span if auto_pad == "VALID" else max(span - padding, 1)
        sizes.append(max(draw(st.integers(1, min(32, side))), smallest))
    return dict(
        x_shape=(batch, group * group_channels, *sizes),
        w_shape=(out_channels, group_channels, *kernel),
        x_dtype=x_dtype,
        w_dtype=w_dtype,
        group=group,
        strides=strides,
        dilations=dilations,
        pads=pads,
        auto_pad=auto_pad,
        per_channel=draw(st.booleans()),
        bias=draw(st.booleans()),
        scales=draw(product_scales),
        w_zp=draw(zero_point(w_dtype)),
        y_zp=draw(zero_point(x_dtype)),
        seed=draw(seeds),
    )


@PROPERTY
@given(conv_params())
def test_qlinear_conv(params):
    model, feeds, num, den, y_zp, bound, y_dtype = conv_case(**params)
    assert_onnxruntime_mode_exact(model, feeds)
    check_directml_mode("QLinearConv", model, feeds, num, den, y_zp, bound, conv_reference(y_dtype))


@st.composite
def matmul_params(draw):
    types = draw(st.sampled_from(sorted(MATMUL_TYPES)))
    a_dtype, b_dtype = MATMUL_TYPES[types]
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
    check_directml_mode("QLinearMatMul", model, feeds, num, den, y_zp, bound, matmul_reference(y_dtype))


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
