"""Each compiled kernel (``dml_ep.numerics.kernels.compiled``) against its numpy twin, bit for bit, in both
arithmetics: the requantize step, QLinearAdd's table lookup through any strides, and the direct
loops of grouped convolutions against im2col and GEMM. The twins are checked against onnxruntime
and exact references elsewhere; these tests hold the compiled forms to the twins' bits."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from operator_cases import conv_case, conv_params, prepared_convolution, product_scales, seeds, zero_point

import dml_ep
from dml_ep.numerics.arithmetic import Arithmetic
from dml_ep.numerics.engines import get_engine
from dml_ep.numerics.kernels import compiled as native
from dml_ep.numerics.kernels.quantize import Requantizer, quant_range
from dml_ep.numerics.kernels.strided_rows import address, strided_rows

pytestmark = pytest.mark.compiled
ARITHMETICS = [Arithmetic("directml"), Arithmetic("onnxruntime", False)]
PROPERTY = settings(derandomize=True, deadline=None, max_examples=150, database=None)


def test_every_compiled_module_is_built_and_the_engines_choose_between_them():
    assert native.MISSING == []
    assert get_engine("onnxruntime").compiled_kernels and not get_engine("numpy").compiled_kernels


@PROPERTY
@given(st.data(), st.sampled_from([np.uint8, np.int8]), st.sampled_from([np.int32, np.float32]), product_scales, seeds)
def test_requantize_matches_its_twin(data, dtype, sums_dtype, scales, seed):
    """Scalar and per-column scales, ties (power-of-two ratios), sums across and beyond the output
    range, with and without a bias (int32 sums: the kernel adds it in the same pass)."""
    rng = np.random.default_rng(seed)
    rows, columns = data.draw(st.integers(1, 40)), data.draw(st.integers(1, 40))
    magnitude = 2 ** data.draw(st.integers(2, 30 if sums_dtype == np.int32 else 24))
    acc = rng.integers(-magnitude, magnitude, (rows, columns), endpoint=False).astype(sums_dtype)
    bias = rng.integers(-magnitude, magnitude, columns).astype(np.int32) if data.draw(st.booleans()) else None
    scale_a, scale_b, scale_out = scales
    if data.draw(st.booleans()):
        scale_b = (scale_b * rng.uniform(0.5, 2, columns)).astype(np.float32)
    output_zero_point = data.draw(zero_point(dtype))
    for arithmetic in ARITHMETICS:
        twin = Requantizer(scale_a, scale_b, scale_out, output_zero_point, dtype, arithmetic)(acc.copy(), bias)
        compiled = Requantizer(scale_a, scale_b, scale_out, output_zero_point, dtype, arithmetic, compiled=True)(acc.copy(), bias)
        np.testing.assert_array_equal(compiled, twin)


def test_requantize_takes_each_calls_bias():
    """The compiled step keeps a bias's row between calls: another bias, or none, is not the kept one."""
    acc = np.arange(-60, 60, dtype=np.int32).reshape(4, 30)
    requantize = Requantizer(np.float32(0.5), np.float32(1), np.float32(1), 0, np.int8, ARITHMETICS[1], compiled=True)
    for bias in (np.full(30, 7, np.int32), np.full(30, -9, np.int32), None, np.full(30, 7, np.int32)):
        expected = np.clip(np.round((acc + (0 if bias is None else bias)) / 2), -128, 127)  # halves to even
        np.testing.assert_array_equal(requantize(acc, bias), expected)


def test_requantize_writes_into_any_out():
    """``out``: a C-contiguous one written by the kernel, a strided one given the same codes."""
    acc = np.arange(-60, 60, dtype=np.int32).reshape(4, 30)
    requantize = Requantizer(np.float32(0.5), np.float32(1), np.float32(1), 0, np.int8, ARITHMETICS[1], compiled=True)
    expected = requantize(acc)
    for out in (np.empty((4, 30), np.int8), np.empty((30, 4), np.int8).T):
        assert requantize(acc, out=out) is out
        np.testing.assert_array_equal(out, expected)


def test_requantize_settles_exact_ties_compiled():
    """Ratio 1/2: every odd sum is an exact half, which the compiled pass hands to the exact tier."""
    acc = np.arange(-301, 302, dtype=np.int32).reshape(1, -1)
    got = Requantizer(np.float32(0.5), np.float32(1), np.float32(1), 0, np.int8, ARITHMETICS[0], compiled=True)(acc.copy())
    expected = np.clip([round(a / 2) for a in acc.reshape(-1)], -128, 127)  # Python rounds halves to even
    np.testing.assert_array_equal(got.reshape(-1), expected)


@st.composite
def strided_pair(draw):
    """Two 8-bit operands of one shape, each dense, broadcast along some axes (stride 0),
    transposed in memory, or a strided slice."""
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=0, max_size=5)))
    rng = np.random.default_rng(draw(seeds))

    def operand():
        kept = tuple(size if draw(st.booleans()) else 1 for size in shape)
        order = draw(st.permutations(range(len(shape))))
        base = rng.integers(0, 256, tuple(kept[axis] * (2 if draw(st.booleans()) else 1) for axis in order), dtype=np.uint8)
        moved = base[tuple(slice(None, None, base.shape[i] // kept[axis]) for i, axis in enumerate(order))]
        return np.broadcast_to(moved.transpose(np.argsort(order)), shape)

    return operand(), operand()


@PROPERTY
@given(strided_pair(), seeds)
def test_table_lookup_reads_any_strides(pair, seed):
    a, b = pair
    table = np.random.default_rng(seed).integers(0, 256, 65536, dtype=np.uint8)
    out = np.empty(a.shape, np.uint8)
    if out.size:
        span, (a_step, b_step), (a_rows, b_rows) = strided_rows(a.shape, a.strides, b.strides)
        native.table_lookup.lookup(table, address(a), a_rows, a_step, address(b), b_rows, b_step, out.reshape(-1), span)
    np.testing.assert_array_equal(out, table[(a.astype(np.intp) << 8) | b])


@PROPERTY
@given(strided_pair(), st.sampled_from([np.uint8, np.int8]), st.data())
def test_quantized_add_matches_its_twin(pair, dtype, data):
    """QLinearAdd computed in MLAS's arithmetic through any strides, against the twin's formula:
    random terms, ones that round half-integers, and ones beyond int32 or NaN (cvtps2dq's INT_MIN).
    A build without a hardware FMA (libm's, exact but slow: dml_ep takes the table there) too."""
    from dml_ep.operators.element_wise_quantized_linear_add import mlas_add

    a, b = (x.view(dtype) for x in pair)
    finite = st.floats(-300, 300, width=32)
    r_ac, r_bc = (np.float32(data.draw(st.one_of(finite, st.sampled_from([0.5, 0.25, 1e30, np.inf])))) for _ in range(2))
    fixed = np.float32(data.draw(st.one_of(finite, st.sampled_from([0.5, -0.5, 2.5, -1e30]))))
    out = np.empty(a.shape, dtype)
    if out.size:
        span, (a_step, b_step), (a_rows, b_rows) = strided_rows(a.shape, a.strides, b.strides)
        with np.errstate(invalid="ignore"):
            native.quantized_add.add(address(a), a_rows, a_step, address(b), b_rows, b_step, out.view(np.uint8).reshape(-1), span,
                                     r_ac, r_bc, fixed, *quant_range(dtype), dtype == np.int8)
    with np.errstate(invalid="ignore", over="ignore"):
        np.testing.assert_array_equal(out, mlas_add(a, b, r_ac, r_bc, fixed, dtype))


def test_quantized_add_every_code_pair():
    """All 65536 pairs of codes, QLinearAdd's terms for scales 0.1, 0.07, 0.15 and zero points 3, 9, 120."""
    from dml_ep.operators.element_wise_quantized_linear_add import mlas_add

    a = np.broadcast_to(np.arange(256, dtype=np.uint8)[:, None], (256, 256))
    b = np.broadcast_to(np.arange(256, dtype=np.uint8)[None, :], (256, 256))
    r_ac, r_bc = np.float32(0.1) / np.float32(0.15), np.float32(0.07) / np.float32(0.15)
    fixed = np.float32(120) - (r_ac * np.float32(3) + r_bc * np.float32(9))
    out = np.empty((256, 256), np.uint8)
    span, (a_step, b_step), (a_rows, b_rows) = strided_rows(a.shape, a.strides, b.strides)
    native.quantized_add.add(address(a), a_rows, a_step, address(b), b_rows, b_step, out.reshape(-1), span, r_ac, r_bc, fixed, 0, 255, False)
    np.testing.assert_array_equal(out, mlas_add(a, b, r_ac, r_bc, fixed, np.uint8))


def grouped_conv_params():
    return conv_params().filter(lambda p: p["group"] > 1 and p["w_shape"][1] <= 2)


@settings(derandomize=True, deadline=None, max_examples=80, database=None)
@given(grouped_conv_params())
def test_direct_convolution_matches_im2col(params):
    """Depthwise and 2-channel-per-group convolutions: the compiled direct loops (onnxruntime engine)
    give the numpy engine's im2col and GEMM outputs, in both arithmetics, 1-D and 2-D."""
    model, feeds, *_ = conv_case(**params)
    for arithmetic in ("directml", "onnxruntime"):
        compiled = dml_ep.InferenceSession(model, arithmetic=arithmetic, engine="onnxruntime")
        twin = dml_ep.InferenceSession(model, arithmetic=arithmetic, engine="numpy")
        np.testing.assert_array_equal(compiled.run(None, feeds)[0], twin.run(None, feeds)[0])
        prepared = prepared_convolution(compiled)
        assert prepared.direct == (not prepared.saturates_u8s8)  # onnxruntime's saturated sums come from its GEMM
        if prepared.direct:
            assert (prepared.requantized_rows is not None) == (arithmetic == "onnxruntime")  # MLAS's step in the loops


def test_direct_convolution_refuses_requantize_parameters_short_of_a_row():
    """convolve_requantized reads its parameters along an output row: fewer is an error, not a read past them."""
    x = np.zeros((1, 4, 4, 16), np.uint8)
    weights, bias = np.zeros((3, 3, 1, 16), np.int16), np.zeros(16, np.int32)
    out = np.empty((1, 4, 4 * 16), np.uint8)
    short = (np.ones(16, np.float32), np.zeros(16, np.float32), np.full(16, 255, np.float32), np.zeros(16, np.uint8))
    with pytest.raises(ValueError, match="cover an output row"):
        native.direct_convolution.convolve_requantized(x, 0, weights, bias, *short, out, 4, 1, 1, 1, 1, 1, 1)


@st.composite
def float_values(draw):
    """float32 values with their scale: random, within a hair of a half-integer quotient or on
    one, beyond the output range, NaN and infinities."""
    rng = np.random.default_rng(draw(seeds))
    scale = np.float32(draw(st.floats(1e-4, 10)))
    n = draw(st.integers(1, 300))
    quotients = rng.uniform(-400, 400, n)
    kind = rng.integers(0, 5, n)
    quotients[kind == 1] = np.round(quotients[kind == 1]) + 0.5  # halves
    quotients[kind == 2] = np.round(quotients[kind == 2]) + 0.5 + rng.choice([-1, 1], np.sum(kind == 2)) * 1e-7
    x = (quotients * scale).astype(np.float32)
    x[kind == 3] = rng.choice([np.nan, np.inf, -np.inf, 1e30, -1e30], np.sum(kind == 3))
    return x, scale


@PROPERTY
@given(float_values(), st.sampled_from([np.uint8, np.int8]), st.data())
def test_quantize_matches_its_twin(values, dtype, data):
    from dml_ep.operators.element_wise_quantize_linear import quantize_values

    x, scale = values
    zero = data.draw(zero_point(dtype))
    for arithmetic in ARITHMETICS:
        twin = quantize_values(x, scale, np.asarray(zero), dtype, arithmetic)
        compiled = quantize_values(x, scale, np.asarray(zero), dtype, arithmetic, compiled=True)
        np.testing.assert_array_equal(compiled, twin)


@PROPERTY
@given(seeds, st.sampled_from([np.int32, np.float32]), st.booleans(), st.booleans())
def test_scale_bias_matches_its_twins(seed, sums_dtype, with_bias, cancelling):
    """MatMulIntegerToFloat's step; ``cancelling``: a bias near minus the product, where float64
    loses the bits that decide the rounding (the twin's exact tier)."""
    from dml_ep.operators.matrix_multiply_integer_to_float import scale_bias_compiled, scale_bias_directml, scale_bias_onnxruntime

    rng = np.random.default_rng(seed)
    rows, columns = rng.integers(1, 30, 2)
    limit = 2**31 if sums_dtype == np.int32 else 2**24
    acc = rng.integers(-limit, limit, (rows, columns)).astype(sums_dtype)
    a_scale = np.float32(rng.uniform(1e-4, 1e-1))
    b_scale = rng.uniform(1e-4, 1e-1, columns).astype(np.float32)
    bias = rng.normal(size=columns).astype(np.float32) * 100 if with_bias else None
    if with_bias and cancelling:
        bias = -(acc[0] * np.float64(a_scale) * b_scale).astype(np.float32)
    for onnxruntime in (True, False):
        dtype = np.float32 if onnxruntime else np.float64
        scale = np.multiply(a_scale, b_scale, dtype=dtype)
        offset = np.zeros(0, dtype) if bias is None else bias.astype(dtype)
        compiled = scale_bias_compiled(acc, scale, offset, onnxruntime)
        twin = (scale_bias_onnxruntime(acc, np.full((1, 1), a_scale), b_scale, bias, False) if onnxruntime
                else scale_bias_directml(acc, np.full((1, 1), a_scale), b_scale, bias))
        np.testing.assert_array_equal(compiled.view(np.int32), twin.view(np.int32))


def test_scale_bias_ties_compiled():
    """The twin's hand-computed ties: 1 + 2^-24 rounds to 1 (even); with a bias of 2^-80, which
    float64 loses, above the tie."""
    from dml_ep.operators.matrix_multiply_integer_to_float import scale_bias_compiled

    acc, scale = np.array([[2**24 + 1]], np.int32), np.array([2.0**-24])
    assert scale_bias_compiled(acc, scale, np.zeros(0), False)[0, 0] == 1.0
    assert scale_bias_compiled(acc, scale, np.array([2.0**-80]), False)[0, 0] == np.float32(1 + 2**-23)


@PROPERTY
@given(st.data(), seeds, st.sampled_from([np.uint8, np.int8]))
def test_im2col_matches_its_twin(data, seed, dtype):
    from types import SimpleNamespace

    from dml_ep.numerics.kernels.im2col import im2col

    kernel = tuple(data.draw(st.integers(1, 5)) for _ in range(2))
    strides, dilations = (tuple(data.draw(st.integers(1, 3)) for _ in range(2)) for _ in range(2))
    start, end = (tuple(data.draw(st.integers(0, 3)) for _ in range(2)) for _ in range(2))
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    sizes = [data.draw(st.integers(max(span - s - e, 1), 16)) for span, s, e in zip(spans, start, end)]
    out = [(size + s + e - span) // stride + 1 for size, s, e, span, stride in zip(sizes, start, end, spans, strides)]
    channels, groups = data.draw(st.sampled_from([(1, 1), (3, 1), (8, 2), (16, 1), (6, 3)]))
    desc = SimpleNamespace(StartPadding=start, EndPadding=end, Strides=strides, Dilations=dilations, GroupCount=groups,
                           OutputTensor=SimpleNamespace(Sizes=(2, channels, *out)))
    x = np.random.default_rng(seed).integers(0, 256, (2, *sizes, channels), dtype=np.uint8).view(dtype)
    if data.draw(st.booleans()):  # an NCHW tensor's NHWC view, as a convolution's input mostly is
        x = np.ascontiguousarray(x.transpose(0, 3, 1, 2)).transpose(0, 2, 3, 1)
    pad = np.uint8(seed % 256).view(dtype)
    np.testing.assert_array_equal(im2col(x, desc, kernel, pad, compiled=True), im2col(x, desc, kernel, pad))


LEVEL_TESTS = {"requantize": "test_requantize_matches_its_twin", "quantize": "test_quantize_matches_its_twin",
               "quantized_add": "test_quantized_add_matches_its_twin",
               "scale_bias": "test_scale_bias_matches_its_twins", "direct_convolution": "test_direct_convolution_matches_im2col"}


@pytest.mark.parametrize("level", ["baseline", "x86_64_v3", "x86_64_v4"])
@pytest.mark.parametrize("name", sorted(LEVEL_TESTS))
def test_every_build_this_cpu_runs_matches_the_twins(name, level, monkeypatch):
    """Each x86-64 level's build of a kernel (setup.py), not only the one loaded, against the
    twins: the module swapped in, its property test run again."""
    import importlib

    if level != "baseline" and level not in native.SUPPORTED:
        pytest.skip(f"this CPU does not run {level}")
    module = importlib.import_module(f"dml_ep.numerics.kernels.compiled.{name}" + ("" if level == "baseline" else f"_{level}"))
    monkeypatch.setattr(native, name, module)
    globals()[LEVEL_TESTS[name]]()


def test_version_says_which_kernels_run(monkeypatch, capsys):
    from dml_ep.cli.commands import main

    with pytest.raises(SystemExit):
        main(["--version"])
    widest = "x86-64-v4" if "x86_64_v4" in native.SUPPORTED else "x86-64-v3" if native.SUPPORTED else "baseline"
    assert f"; compiled kernels ({widest})" in capsys.readouterr().out
    monkeypatch.setattr(native, "MISSING", ["requantize"])
    assert native.summary() == "compiled kernels not built: requantize (their numpy twins run)"
