"""com.microsoft QLinearAveragePool and QLinearGlobalAveragePool on QUANTIZED_LINEAR_AVERAGE_POOLING:
dml_ep's "onnxruntime" arithmetic against onnxruntime's CPU EP bit for bit, and "directml" against
the exact ideal value ``sum(x - zx) * sx / (count * sy)``, computed here with Python fractions."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

import dml_ep
from dml_ep.conformance.causes import ideal_values
from dml_ep.core.errors import InvalidAttributeError, ModelError, QuantizationParameterError
from onnx_builders import Feed, assert_onnxruntime_mode_exact, run_dml, run_ort, single_node_model

MS = "com.microsoft"


def pool_model(x, sx, zx, sy, zy, op="QLinearAveragePool", **attributes):
    """A single QLinear(Global)AveragePool node; ``x`` is fed, the parameters are initializers
    (``None`` omits a zero point)."""
    operands = [Feed(x), np.float32(sx), zx, np.float32(sy), zy]
    return single_node_model(op, operands, x.dtype, x.ndim, domain=MS, **attributes)


def exact_pool(x, sx, zx, sy, zy, kernel=None, strides=None, pads=None, count_include_pad=0, channels_last=0) -> np.ndarray:
    """DirectML's definition, by hand: every window's mean of the dequantized values (padding not
    counted unless ``count_include_pad``), divided by ``sy``, rounded half to even in exact
    fractions, plus ``zy``, saturated. ``kernel`` None: global pooling."""
    if channels_last:
        x = np.moveaxis(x, -1, 1)
    spatial = x.shape[2:]
    kernel = kernel or list(spatial)
    strides = strides or [1] * len(spatial)
    pads = pads or [0] * 2 * len(spatial)
    start, end = pads[:len(spatial)], pads[len(spatial):]
    out_spatial = [(n + p0 + p1 - k) // s + 1 for n, k, s, p0, p1 in zip(spatial, kernel, strides, start, end)]
    info = np.iinfo(x.dtype)
    out = np.empty((*x.shape[:2], *out_spatial), dtype=x.dtype)
    scale = Fraction(float(np.float32(sx))) / Fraction(float(np.float32(sy)))
    for n, c, *o in itertools.product(*map(range, out.shape)):
        first = [oi * s - p0 for oi, s, p0 in zip(o, strides, start)]
        taps = [p for p in itertools.product(*(range(f, f + k) for f, k in zip(first, kernel)))
                if all(0 <= pi < size for pi, size in zip(p, spatial))]
        total = sum(int(x[(n, c, *p)]) - int(zx) for p in taps)
        count = int(np.prod(kernel)) if count_include_pad else len(taps)
        value = Fraction(total) * scale / count
        floor = value.numerator // value.denominator
        rest = value - floor
        rounded = floor + (1 if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and floor % 2) else 0)
        out[(n, c, *o)] = min(max(rounded + int(zy), info.min), info.max)
    return np.moveaxis(out, 1, -1) if channels_last else out


def codes(shape, dtype, seed):
    info = np.iinfo(dtype)
    return np.random.default_rng(seed).integers(info.min, info.max + 1, shape).astype(dtype)


def parameters(dtype, seed, power_of_two=False):
    """Scales across 1e-3..1 (or powers of two, whose averages hit exact ties), zero points anywhere."""
    rng = np.random.default_rng(seed + 1000)
    info = np.iinfo(dtype)
    scales = 2.0 ** rng.integers(-8, 1, 2) if power_of_two else 10.0 ** rng.uniform(-3, 0, 2)
    zx, zy = (dtype(v) for v in rng.integers(info.min, info.max + 1, 2))
    return np.float32(scales[0]), zx, np.float32(scales[1]), zy


POOLS = {  # name -> (NCHW input shape, attributes)
    "2x2": ((2, 3, 6, 8), dict(kernel_shape=[2, 2])),
    "2x2-stride2": ((2, 3, 6, 8), dict(kernel_shape=[2, 2], strides=[2, 2])),
    "3x3-stride2": ((1, 4, 9, 7), dict(kernel_shape=[3, 3], strides=[2, 2])),
    "3x3-pads": ((2, 3, 7, 9), dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
    "3x3-pads-include": ((2, 3, 7, 9), dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1)),
    "3x3-uneven-pads": ((2, 3, 7, 9), dict(kernel_shape=[3, 3], pads=[0, 2, 2, 1], strides=[2, 2])),
    "ceil": ((2, 3, 7, 9), dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)),
    "ceil-include": ((2, 3, 7, 9), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1)),
    "same-upper": ((1, 3, 7, 9), dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")),
    "same-lower": ((1, 3, 7, 9), dict(kernel_shape=[4, 2], auto_pad="SAME_LOWER")),
    "valid": ((1, 3, 7, 9), dict(kernel_shape=[3, 2], strides=[2, 3], auto_pad="VALID")),
    "1x-width": ((1, 5, 4, 25), dict(kernel_shape=[1, 25])),  # a row at a time: not the whole image
    "whole-image": ((2, 3, 5, 7), dict(kernel_shape=[5, 7])),  # onnxruntime takes MLAS's global route
    "1d": ((2, 3, 11), dict(kernel_shape=[3], strides=[2])),
    "1d-pads-include": ((2, 3, 11), dict(kernel_shape=[4], pads=[1, 2], count_include_pad=1)),
    "1d-whole": ((2, 3, 11), dict(kernel_shape=[11])),
    "3d": ((1, 2, 4, 5, 6), dict(kernel_shape=[2, 3, 2], strides=[1, 2, 2], pads=[1, 0, 1, 0, 1, 1])),
}
GRID = [pytest.param(name, channels_last, dtype, id=f"{name}-{'nhwc' if channels_last else 'nchw'}-{np.dtype(dtype).name}")
        for name in POOLS for channels_last in (0, 1) for dtype in (np.uint8, np.int8)]


def pool_case(name, channels_last, dtype, seed, power_of_two=False):
    shape, attributes = POOLS[name]
    x = codes(shape, dtype, seed)
    if channels_last:
        x = np.ascontiguousarray(np.moveaxis(x, 1, -1))
    return pool_model(x, *parameters(dtype, seed, power_of_two), channels_last=channels_last, **attributes)


@pytest.mark.host_sensitive
@pytest.mark.parametrize("name, channels_last, dtype", GRID)
def test_onnxruntime_arithmetic_matches_onnxruntime(name, channels_last, dtype):
    for seed in range(4):
        model, feeds = pool_case(name, channels_last, dtype, seed, power_of_two=seed % 2 == 1)
        plan = dml_ep.InferenceSession(model).plan
        assert not plan.fallback_nodes, plan.fallback_nodes[0].reason
        assert_onnxruntime_mode_exact(model, feeds)


GLOBAL_SHAPES = [(2, 3, 7, 9), (1, 20, 5, 5), (2, 3, 11), (1, 2, 3, 4, 5), (3, 1, 6, 6), (1, 9, 1, 1)]


@pytest.mark.host_sensitive
@pytest.mark.parametrize("channels_last", [0, 1], ids=["nchw", "nhwc"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("shape", GLOBAL_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_global_onnxruntime_arithmetic_matches_onnxruntime(shape, dtype, channels_last):
    for seed in range(4):
        x = codes(shape, dtype, seed)
        model, feeds = pool_model(x, *parameters(dtype, seed, power_of_two=seed % 2 == 1), op="QLinearGlobalAveragePool",
                                  channels_last=channels_last)
        assert_onnxruntime_mode_exact(model, feeds)


# --- "directml": the exact definition ----------------------------------------------------------

SMALL = [  # (input shape as NCHW, pooling arguments of exact_pool and their node attributes)
    ((2, 3, 5, 6), dict(kernel=[2, 2])),
    ((1, 2, 7, 5), dict(kernel=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ((1, 2, 7, 5), dict(kernel=[3, 3], strides=[2, 2], pads=[1, 0, 2, 1], count_include_pad=1)),
    ((2, 2, 9), dict(kernel=[3], strides=[2], pads=[2, 1])),
    ((1, 2, 3, 4, 3), dict(kernel=[2, 2, 2], pads=[1, 0, 0, 0, 1, 1])),
    ((2, 3, 4, 5), dict()),  # global
]


def small_case(shape, arguments, dtype, seed, channels_last, power_of_two):
    x = codes(shape, dtype, seed)
    if channels_last:
        x = np.ascontiguousarray(np.moveaxis(x, 1, -1))
    params = parameters(dtype, seed, power_of_two)
    attributes = dict(channels_last=channels_last)
    if "kernel" in arguments:
        attributes.update(kernel_shape=arguments["kernel"], strides=arguments.get("strides", [1] * len(arguments["kernel"])),
                          pads=arguments.get("pads", [0] * 2 * len(arguments["kernel"])),
                          count_include_pad=arguments.get("count_include_pad", 0))
        model, feeds = pool_model(x, *params, **attributes)
    else:
        model, feeds = pool_model(x, *params, op="QLinearGlobalAveragePool", **attributes)
    return model, feeds, exact_pool(x, *params, channels_last=channels_last, **arguments)


@pytest.mark.parametrize("channels_last", [0, 1], ids=["nchw", "nhwc"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("shape, arguments", SMALL, ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else None)
def test_directml_arithmetic_is_the_rounded_ideal(shape, arguments, dtype, channels_last):
    for seed in range(4):
        model, feeds, expected = small_case(shape, arguments, dtype, seed, channels_last, power_of_two=seed % 2 == 1)
        np.testing.assert_array_equal(run_dml(model, feeds, "directml"), expected, strict=True)


@pytest.mark.host_sensitive
def test_ties_round_to_even_in_directml_and_not_always_in_onnxruntime():
    """Averages of two codes with equal scales of 0.1: the exact value is often k + 1/2, which
    DirectML rounds to even; onnxruntime's float32 average (0.1 is inexact) lands on either side.
    Pins the difference: onnxruntime's arithmetic is reproduced bit for bit, and it is not DirectML's."""
    x = np.arange(200, dtype=np.uint8).reshape(1, 1, 1, 200)
    sx = sy = np.float32(0.1)
    model, feeds = pool_model(x, sx, np.uint8(0), sy, np.uint8(0), kernel_shape=[1, 2])
    expected = exact_pool(x, sx, np.uint8(0), sy, np.uint8(0), kernel=[1, 2])
    ours = run_dml(model, feeds, "directml")
    np.testing.assert_array_equal(ours, expected, strict=True)
    np.testing.assert_array_equal(ours.reshape(-1)[:6], [0, 2, 2, 4, 4, 6])  # 0.5, 1.5, 2.5, ... to even
    theirs = run_ort(model, feeds, "ort")
    assert_onnxruntime_mode_exact(model, feeds)
    differ = np.flatnonzero(theirs != expected)
    assert differ.size > 0 and np.all(np.abs(theirs.astype(int) - expected).reshape(-1)[differ] == 1)


@pytest.mark.host_sensitive
def test_global_route_rounds_the_float32_product_not_the_exact_value():
    """QLinearGlobalAveragePool in onnxruntime: float32(sum - zx * N) * float32(sx / (sy * N)). With
    sx / sy = 1.5 (0.3 / 0.2, both inexact) and N = 3 the exact value sum / 2 ties at every odd sum;
    onnxruntime's rounded multiplier settles some of them away from even."""
    x = (np.arange(3 * 100) % 256).astype(np.uint8).reshape(1, 100, 1, 3)
    sx, sy = np.float32(0.3), np.float32(0.2)
    model, feeds = pool_model(x, sx, np.uint8(0), sy, np.uint8(0), op="QLinearGlobalAveragePool")
    expected = exact_pool(x, sx, np.uint8(0), sy, np.uint8(0))
    np.testing.assert_array_equal(run_dml(model, feeds, "directml"), expected, strict=True)
    assert_onnxruntime_mode_exact(model, feeds)
    theirs = run_ort(model, feeds, "ort")
    differ = theirs != expected
    assert differ.any() and np.all(np.abs(theirs.astype(int) - expected)[differ] == 1)


@pytest.mark.host_sensitive
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("image, kernel", [((4, 9), [2, 3]), ((2, 3), [2, 3])], ids=["windows-of-6", "whole-image-of-6"])
def test_ties_of_six_element_windows_tell_the_routes_apart(image, kernel, dtype):
    """Equal power-of-two scales and windows of 6: the exact mean is often k + 1/2. onnxruntime's
    pooling route divides an exact float32 sum by 6 (exact: ties stay ties, to even); its global
    route multiplies by float32(1/6) (inexact: ties move). Dividing by the count, not multiplying by
    its reciprocal, and which route a node takes, are both decided here."""
    x = codes((2, 64, *image), dtype, 9)
    for scale in (np.float32(1.0), np.float32(0.25)):
        model, feeds = pool_model(x, scale, dtype(3), scale, dtype(-1 if dtype == np.int8 else 1), kernel_shape=kernel)
        assert_onnxruntime_mode_exact(model, feeds)


def test_exact_value_is_the_window_mean_over_the_output_scale():
    """compare's ideal values (the operator's exact_value) in the output's order, NHWC included."""
    x = codes((1, 5, 6, 3), np.uint8, 7)
    sx, zx, sy, zy = parameters(np.uint8, 7)
    model, feeds = pool_model(x, sx, zx, sy, zy, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], channels_last=1)
    (entry,) = dml_ep.InferenceSession(model).plan.dml_nodes
    index = np.arange(int(np.prod(entry.output_shape)))
    ideal = ideal_values(entry.desc, {"InputTensor": x, "InputScaleTensor": np.float32(sx), "InputZeroPointTensor": zx,
                                      "OutputScaleTensor": np.float32(sy), "OutputZeroPointTensor": zy}, index)
    nchw = np.moveaxis(x, -1, 1).astype(int) - int(zx)
    padded = np.pad(nchw, ((0, 0), (0, 0), (1, 1), (1, 1)))
    mask = np.pad(np.ones(nchw.shape[2:], int), 1)
    want = []
    for oh, ow, c in itertools.product(range(3), range(3), range(3)):  # NHWC order
        window = (slice(2 * oh, 2 * oh + 3), slice(2 * ow, 2 * ow + 3))
        want.append(Fraction(int(padded[0, c][window].sum())) * Fraction(float(sx)) / (int(mask[window].sum()) * Fraction(float(sy))))
    assert ideal == want


# --- the plan ----------------------------------------------------------------------------------


def test_plan_runs_both_ops_on_quantized_linear_average_pooling_from_feature_level_6_2():
    x = codes((1, 4, 6, 6), np.int8, 1)
    for model, _ in (pool_model(x, 0.1, np.int8(1), 0.2, np.int8(-3), kernel_shape=[2, 2]),
                     pool_model(x, 0.1, np.int8(1), 0.2, np.int8(-3), op="QLinearGlobalAveragePool")):
        (entry,) = dml_ep.InferenceSession(model).plan.dml_nodes
        assert entry.operator == "DML_OPERATOR_QUANTIZED_LINEAR_AVERAGE_POOLING"
        assert dml_ep.InferenceSession(model, feature_level="6_2").plan.dml_nodes
        (fallback,) = dml_ep.InferenceSession(model, feature_level="6_1").plan.fallback_nodes
        assert "requires DML_FEATURE_LEVEL_6_2" in fallback.reason and "fails creating the operator" in fallback.reason


def test_desc_mirrors_the_dml_ep():
    """1-D pooling: {1, N, C, W} with the kernel arguments shifted; NHWC: sizes NCHW over NHWC strides."""
    x = codes((2, 11, 3), np.uint8, 2)  # [N, W, C]
    model, _ = pool_model(x, 0.1, np.uint8(1), 0.2, np.uint8(3), kernel_shape=[3], strides=[2], pads=[1, 0],
                          count_include_pad=1, channels_last=1)
    (entry,) = dml_ep.InferenceSession(model).plan.dml_nodes
    desc = entry.desc
    assert desc.InputTensor.Sizes == (1, 3, 2, 11) and desc.InputTensor.Strides == (66, 1, 33, 3)
    assert desc.OutputTensor.Sizes == (1, 3, 2, 5) and entry.output_shape == (2, 5, 3)
    assert (desc.DimensionCount, desc.WindowSize, desc.Strides, desc.StartPadding, desc.EndPadding, desc.Dilations) == (
        2, (1, 3), (1, 2), (0, 1), (0, 0), (1, 1))
    assert desc.IncludePadding == 1 and desc.InputScaleTensor.Sizes == (1, 1, 1, 1)


def test_an_omitted_zero_point_is_rejected_by_onnxruntime():
    """The schema marks the zero points optional, but onnxruntime's type inference rejects a node
    without them (ValidateTypeAndShapeForScaleAndZP): a typed error, as onnxruntime's."""
    x = codes((1, 2, 4, 4), np.uint8, 3)
    for zx, zy in ((np.uint8(0), None), (None, np.uint8(0))):
        model, _ = pool_model(x, 0.5, zx, 0.25, zy, kernel_shape=[2, 2])
        with pytest.raises(ModelError, match="onnxruntime rejects it"):
            dml_ep.InferenceSession(model)


@pytest.mark.host_sensitive
def test_ceil_window_starting_past_the_input_falls_back():
    """onnxruntime drops a last ceil_mode window that starts past the input; the DML EP keeps it."""
    x = codes((1, 1, 5, 5), np.uint8, 4)
    model, feeds = pool_model(x, 0.1, np.uint8(3), 0.1, np.uint8(3), kernel_shape=[3, 3], strides=[3, 3], pads=[0, 0, 2, 2], ceil_mode=1)
    session = dml_ep.InferenceSession(model)
    (fallback,) = session.plan.fallback_nodes
    assert "start past the input" in fallback.reason and "on DirectML in the real EP" in fallback.reason
    np.testing.assert_array_equal(session.run(None, feeds)[0], run_ort(model, feeds, "ort"))


@pytest.mark.parametrize("attributes, error, rule", [
    (dict(), ModelError, "Required attribute 'kernel_shape' is missing"),  # onnxruntime's schema checks come first
    (dict(kernel_shape=[2]), ModelError, "kernel_shape has incorrect size"),
    (dict(kernel_shape=[2, 2], strides=[0, 1]), ModelError, "strides must only contain positive values"),
    (dict(kernel_shape=[2, 2], pads=[2, 0, 0, 0]), InvalidAttributeError, "must be smaller than kernel_shape"),
    (dict(kernel_shape=[2, 2], auto_pad="SAME"), InvalidAttributeError, "auto_pad 'SAME'"),
])
def test_invalid_attributes_raise_typed_errors(attributes, error, rule):
    model, _ = pool_model(codes((1, 2, 4, 4), np.uint8, 5), 0.1, np.uint8(0), 0.1, np.uint8(0), **attributes)
    with pytest.raises(error, match=rule):
        dml_ep.InferenceSession(model)


@pytest.mark.host_sensitive
def test_a_kernel_larger_than_the_input_falls_back_and_runs_as_onnxruntime_runs_it():
    """onnxruntime's output size truncates toward zero ((4 - 5) // 1 + 1 = 1 output row, of the
    rows there are); DirectML's formula gives none. PP-OCRv4's recognizer hits this at height 1."""
    x = codes((1, 2, 4, 4), np.uint8, 5)
    model, feeds = pool_model(x, 0.1, np.uint8(0), 0.1, np.uint8(0), kernel_shape=[5, 2])
    session = dml_ep.InferenceSession(model)
    fallback, = session.plan.entries
    assert fallback.reason.startswith("the kernel spans 5 but the padded input is only 4")
    np.testing.assert_array_equal(session.run(None, feeds)[0], run_ort(model, feeds, "ort"))


def test_invalid_parameters_raise_typed_errors():
    x = codes((1, 2, 4, 4), np.uint8, 6)
    model, _ = single_node_model("QLinearAveragePool", [Feed(x), np.full(2, 0.1, np.float32), np.uint8(0), np.float32(0.1), np.uint8(0)],
                                 np.uint8, 4, domain=MS, kernel_shape=[2, 2])
    with pytest.raises(ModelError, match="Scale and Zero-point must be a scalar"):
        dml_ep.InferenceSession(model)
    model, _ = pool_model(x, 0.0, np.uint8(0), 0.1, np.uint8(0), kernel_shape=[2, 2])
    with pytest.raises(QuantizationParameterError, match="not positive"):
        dml_ep.InferenceSession(model)


@pytest.mark.host_sensitive
def test_more_than_three_spatial_dimensions_fall_back():
    x = codes((1, 2, 2, 2, 2, 3), np.uint8, 8)
    model, feeds = pool_model(x, 0.1, np.uint8(0), 0.1, np.uint8(0), op="QLinearGlobalAveragePool")
    session = dml_ep.InferenceSession(model)
    (fallback,) = session.plan.fallback_nodes
    assert "4-D pooling is not supported" in fallback.reason
    np.testing.assert_array_equal(session.run(None, feeds)[0], run_ort(model, feeds, "ort"))
