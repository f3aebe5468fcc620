"""Operator test cases shared by the grid, property and compiled-kernel tests: QLinearConv,
QLinearMatMul and QLinearAdd models of random codes with their exact ideal outputs and error
bounds, float operands for the element-wise float ops and their check in both arithmetics, the
hypothesis strategies of the property tests, and what a session's prepared convolution is.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from hypothesis import strategies as st
from onnx import helper

from dml_ep.ort.reference import cpu_session
from exact_values import exact_accumulator, resolve_pads
from onnx_builders import Feed, matmul_nbits, objects, qlinear_add, qlinear_conv, qlinear_matmul, ratio, run_dml, run_ort, with_accuracy_level

# onnxruntime's float32 requantization (two rounded scale operations, one rounded product) is
# within 3 float32 ulps of the ideal value; 2^-21 relative leaves a margin of 2. QLinearAdd's float32
# error (rounded ratios sa/sc and sb/sc, a rounded fixed part, two FMAs) is a few float32 ulps of the
# largest term; 2^-21 of the sum of the terms' magnitudes covers it.
FLOAT32_RELATIVE_ERROR = 2.0**-21

# onnxruntime registers QLinearConv for (uint8, uint8), (uint8, int8) and (int8, int8) only, and
# QLinearMatMul for uint8 A with uint8 or int8 B, and int8 A with int8 B: the same pairs.
TYPES = {"u8s8": (np.uint8, np.int8), "u8u8": (np.uint8, np.uint8), "s8s8": (np.int8, np.int8)}


# --- QLinearConv, QLinearMatMul, QLinearAdd ----------------------------------------------------


def conv_case(x_shape, w_shape, x_dtype=np.uint8, w_dtype=np.int8, group=1, strides=None, dilations=None, pads=None,
              auto_pad=None, per_channel=False, bias=False, scales=None, w_zp=None, y_zp=None, seed=0):
    """A QLinearConv model with random full-range codes, and its exact ideal output.

    ``scales`` = (xs, ws, ys) fixes the scales (else ys is chosen so the outputs spread over the
    range); ``w_zp`` and ``y_zp`` fix the filter and output zero points (else random, per-channel
    filter ones all equal as onnxruntime requires, and y_zp mid-range). Returns (model, feeds, num,
    den, y_zp, error bound, y dtype).
    """
    rng = np.random.default_rng(seed)
    x_info, w_info = np.iinfo(x_dtype), np.iinfo(w_dtype)
    x = rng.integers(x_info.min, x_info.max + 1, x_shape).astype(x_dtype)
    w = rng.integers(w_info.min, w_info.max + 1, w_shape).astype(w_dtype)
    spatial = len(x_shape) - 2
    strides, dilations = strides or [1] * spatial, dilations or [1] * spatial
    starts, ends = resolve_pads(x_shape[2:], w_shape[2:], strides, dilations, pads, auto_pad)
    out_channels = w_shape[0]
    x_zp = x_dtype(rng.integers(x_info.min, x_info.max + 1))
    w_zp = w_dtype(rng.integers(w_info.min, w_info.max + 1) if w_zp is None else w_zp)
    w_zps = np.full(out_channels, w_zp, dtype=w_dtype) if per_channel else np.array(w_zp)
    acc = exact_accumulator(x, x_zp, w, w_zps, group, strides, dilations, starts, ends)
    bias_values = rng.integers(-50000, 50000, out_channels).astype(np.int32) if bias else None
    if bias:
        acc = acc + bias_values.reshape(1, -1, *[1] * spatial)
    xs, ws, ys = scales or (np.float32(0.02), np.float32(0.005), None)
    w_scales = (ws * rng.uniform(0.5, 2.0, out_channels)).astype(np.float32) if per_channel else np.float32(ws)
    if ys is None:
        ys = np.float32(xs * ws * max(acc.std(), 1.0) / 40)
    if y_zp is None:
        y_zp = rng.integers(x_info.min // 2 + x_info.max // 4, x_info.max // 2 + x_info.max // 4 + 1)
    y_zp = x_dtype(y_zp)

    attributes = dict(strides=strides, dilations=dilations)
    if auto_pad:
        attributes["auto_pad"] = auto_pad
    else:
        attributes["pads"] = starts + ends
    if group > 1:
        attributes["group"] = group
    model, feeds = qlinear_conv(x, np.float32(xs), x_zp, w, w_scales, w_zps, np.float32(ys), y_zp, bias_values, **attributes)

    multipliers = [Fraction(float(xs)) * Fraction(float(s)) / Fraction(float(ys)) for s in np.atleast_1d(w_scales)]
    num = objects(acc) * np.array([m.numerator for m in multipliers], dtype=object).reshape(1, -1, *[1] * spatial)
    den = np.array([m.denominator for m in multipliers], dtype=object).reshape(1, -1, *[1] * spatial)
    bound = np.abs(acc.astype(np.float64) * np.float64(xs) * np.atleast_1d(w_scales).reshape(1, -1, *[1] * spatial) / np.float64(ys))
    return model, feeds, num, den, y_zp, bound * FLOAT32_RELATIVE_ERROR + 2.0**-30, np.dtype(x_dtype)


def prepared_convolution(session):
    """The prepared kernel of a session's single DML node (a convolution), as its runs use it."""
    (node,) = session.plan.dml_nodes
    (prepared,) = session.executor.kernel_state(node).prepared.values()
    return prepared


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


def add_case(a, b, scales, zero_points):
    """The model, feeds and exact ideal output of QLinearAdd on these codes."""
    (sa, sb, sc), (za, zb, zc) = (np.float32(s) for s in scales), zero_points
    dtype = a.dtype.type
    model, feeds = qlinear_add(a, sa, dtype(za), b, sb, dtype(zb), sc, dtype(zc))
    (pa, qa), (pb, qb), (pc, qc) = ratio(sa), ratio(sb), ratio(sc)
    num = ((objects(a) - za) * pa * qb + (objects(b) - zb) * pb * qa) * qc
    den = qa * qb * pc
    r_ac, r_bc = float(sa) / float(sc), float(sb) / float(sc)
    terms = (np.abs(a.astype(float)) + abs(za)) * r_ac + (np.abs(b.astype(float)) + abs(zb)) * r_bc + abs(zc)
    return model, feeds, num, den, zc, terms * FLOAT32_RELATIVE_ERROR


# --- float element-wise ops ---------------------------------------------------------------------


def operands(a_shape, b_shape, dtype, seed=0):
    """Random values of both signs spanning several binades, so sums round and cancel."""
    rng = np.random.default_rng(seed)

    def draw(shape):
        return (rng.standard_normal(shape) * 2.0 ** rng.integers(-8, 9, shape)).astype(dtype)

    return draw(a_shape), draw(b_shape)


def check_both_modes(model, feeds):
    for arithmetic, reference in (("onnxruntime", "ort"), ("directml", "ort-exact")):
        expected = run_ort(model, feeds, reference)
        actual = run_dml(model, feeds, arithmetic)
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        np.testing.assert_array_equal(actual, expected, err_msg=f"arithmetic={arithmetic}", strict=True)


# --- MatMulNBits ---------------------------------------------------------------------------------


def rows(model, m, seed=1):
    k = next(a.i for a in model.graph.node[0].attribute if a.name == "K")
    dtype = helper.tensor_dtype_to_np_dtype(model.graph.input[0].type.tensor_type.elem_type)
    return np.random.default_rng(seed).standard_normal((m, k)).astype(dtype)


def host_quantizes_activations() -> bool:
    """Whether the host's onnxruntime runs accuracy level 4 as CompInt8 (MLAS has the kernel from
    AVX2 on; without it, level 4 computes as level 0)."""
    model = matmul_nbits(64, 4, 32, accuracy_level=4)
    a = rows(model, 2)
    return not np.array_equal(cpu_session(model).run(None, {"a": a})[0], cpu_session(with_accuracy_level(model, 0)).run(None, {"a": a})[0])


# --- hypothesis strategies (the property tests') -------------------------------------------------

MAC_BUDGET = 200_000

scales = st.floats(-4, 1).map(lambda exponent: np.float32(10.0**exponent))  # 1e-4 .. 1e1
seeds = st.integers(0, 2**16)


def power_of_two(exponent) -> np.float32:
    return np.float32(2.0**exponent)


# Scale triples whose exact ratio is 2^-1 .. 2^-3, so that many ideal values are exact ties.
product_ties = st.tuples(st.integers(0, 8), st.integers(0, 8), st.integers(1, 3)).map(
    lambda e: (power_of_two(-e[0]), power_of_two(-e[1]), power_of_two(e[2] - e[0] - e[1]))  # xs * ws / ys
)
product_scales = st.one_of(st.tuples(scales, scales, scales), product_ties)


def zero_point(dtype):
    info = np.iinfo(dtype)
    return st.integers(int(info.min), int(info.max))


@st.composite
def conv_params(draw):
    types = draw(st.sampled_from(sorted(TYPES)))
    x_dtype, w_dtype = TYPES[types]
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
