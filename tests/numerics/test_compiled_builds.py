"""One rounding per operator, whatever the build: each build of the compiled kernels this CPU runs
(setup.py: the baseline, x86-64-v3 and x86-64-v4) gives its numpy twin's codes on ties and
near-ties, and onnxruntime's, or ONNX's expected outputs, where the arithmetic is theirs.

A test swaps one build in for ``dml_ep.numerics.kernels.compiled.<name>`` (a build this CPU cannot run
skips) and checks that the operator called it. Inputs are cut into calls of 1, 2, 3, ... elements,
so that every kind of value meets a vector body and a scalar tail. Under QEMU user mode,
``-cpu Nehalem`` runs the baseline build alone and ``-cpu Haswell`` the x86-64-v3 one as well;
x86-64-v4 runs only on a host with AVX-512 (QEMU 7.2's TCG has none).
"""

from __future__ import annotations

import importlib
import re
from itertools import accumulate, count, takewhile

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.backend.test.loader import load_model_tests
from onnx.backend.test.runner import _normalize_tensor
from onnx_builders import Feed, qlinear_add, qlinear_conv, qlinear_matmul, single_node_model
from exact_values import exact_quantize

import dml_ep
import dml_ep.interop.backend
from dml_ep.numerics.arithmetic import Arithmetic
from dml_ep.numerics.kernels import compiled as native
from dml_ep.numerics.kernels.quantize import Requantizer
from dml_ep.numerics.kernels.strided_rows import address, strided_rows
from dml_ep.ort.reference import cpu_session

pytestmark = [pytest.mark.compiled, pytest.mark.host_sensitive]
F32 = np.float32
ARITHMETICS = [Arithmetic("directml"), Arithmetic("onnxruntime", False)]


class Recording:
    """A kernel module standing in for itself, noting which of its functions were looked up."""

    def __init__(self, module):
        self.module, self.called = module, set()

    def __getattr__(self, name):
        value = getattr(self.module, name)
        if callable(value):
            self.called.add(name)
        return value


@pytest.fixture(params=["baseline", "x86_64_v3", "x86_64_v4"])
def build(request, monkeypatch):
    """``build(name)``: the ``request.param`` build of kernel module ``name``, swapped in for the
    test (a :class:`Recording`)."""
    level = request.param
    if level != "baseline" and level not in native.SUPPORTED:
        pytest.skip(f"this CPU does not run {level}")

    def swap(name):
        module = importlib.import_module(f"dml_ep.numerics.kernels.compiled.{name}" + ("" if level == "baseline" else f"_{level}"))
        recording = Recording(module)
        monkeypatch.setattr(native, name, recording)
        return recording

    return swap


def pieces(n: int) -> list[slice]:
    """``range(n)`` cut into slices of 1, 2, 3, ... elements (the last one shorter)."""
    cuts = [0, *takewhile(lambda c: c < n, accumulate(count(1))), n]
    return [slice(a, b) for a, b in zip(cuts, cuts[1:])]


# --- QuantizeLinear and DynamicQuantizeLinear's elements (kernels.compiled.quantize) -------------

# DynamicQuantizeLinear's scales for ranges of 5 (test_dynamicquantizelinear's [-3, 2]: float32(1/51)),
# 2 and 6; 2^-4, whose halves are exact; others whose halves, rounded to float32, give quotients on
# the tie or a hair from it.
TIE_SCALES = [F32(5) / F32(255), F32(2) / F32(255), F32(6) / F32(255), F32(2.0**-4), F32(0.1), F32(1) / F32(3), F32(0.9699555)]
OFFICIAL_X = np.array([0, 2, -3, -2.5, 1.34, 0.5], F32)  # test_dynamicquantizelinear's input: scale 5/255, zero point 153


def halves(scale) -> np.ndarray:
    """``(k + 1/2) * scale`` rounded to float32 for k in [-300, 300), with its neighbours on either
    side, the official input, NaN and infinities, in a fixed shuffled order."""
    ties = ((np.arange(-300, 300) + 0.5) * np.float64(scale)).astype(F32)
    x = np.concatenate([ties, np.nextafter(ties, F32(np.inf)), np.nextafter(ties, F32(-np.inf)), OFFICIAL_X, [np.nan, np.inf, -np.inf]])
    return np.random.default_rng(0).permutation(x.astype(F32))


def compiled_codes(x, scale, zero_point, dtype, arithmetic):
    """The compiled quantize step on ``x``, one call per piece."""
    from dml_ep.operators.element_wise_quantize_linear import quantize_values

    return np.concatenate([quantize_values(x[part], scale, np.asarray(zero_point), dtype, arithmetic, compiled=True)
                           for part in pieces(x.size)])


@pytest.mark.parametrize("scale", TIE_SCALES, ids=lambda s: f"{float(s):.6g}")
def test_quantize_ties_match_the_twin(build, scale):
    from dml_ep.operators.element_wise_quantize_linear import quantize_values

    module, x = build("quantize"), halves(scale)
    for dtype, zero_point in ((np.uint8, 153), (np.uint8, 0), (np.int8, 0), (np.int8, -17)):
        for arithmetic in ARITHMETICS:
            twin = quantize_values(x, scale, np.asarray(zero_point), dtype, arithmetic)
            np.testing.assert_array_equal(compiled_codes(x, scale, zero_point, dtype, arithmetic), twin,
                                          err_msg=f"{dtype.__name__} zero point {zero_point}, {arithmetic.mode}")
    assert module.called == {"mlas"}  # DirectML's float32 quotient is MLAS's


def test_quantize_official_near_tie_in_every_build(build):
    """x = 0.5 at scale float32(5/255), zero point 153: the float32 quotient is 25.5 (a tie, 26:
    code 179, in both arithmetics) while the exact one is 25.4999991 (the ideal 25: code 178)."""
    from dml_ep.operators.element_wise_quantize_linear import quantize_values

    build("quantize")
    x = np.tile(OFFICIAL_X, 40)  # the vector body as well as the scalar tail
    scale = F32(5) / F32(255)
    assert np.float32(0.5) / scale == 25.5 and 0.5 / float(scale) < 25.5
    for arithmetic, code in zip(ARITHMETICS, (179, 179)):
        whole = quantize_values(x, scale, np.asarray(153), np.uint8, arithmetic, compiled=True)
        for codes in (compiled_codes(x, scale, 153, np.uint8, arithmetic), whole):
            np.testing.assert_array_equal(codes.reshape(-1, 6), np.tile([153, 255, 0, 26, 221, code], (40, 1)), err_msg=arithmetic.mode)


def test_quantize_linear_ties_match_onnxruntime(build):
    """QuantizeLinear on DirectML against onnxruntime's CPU EP, in both arithmetics (DirectML's
    float32 quotient is MLAS's), at every value; the exact quotient only at the exact ties (scale
    2^-4: the float32 quotient is the exact one)."""
    module = build("quantize")
    for scale in TIE_SCALES:
        x = halves(scale)[None, :]
        finite = np.isfinite(x)
        model = single_node_model("QuantizeLinear", [Feed(x), scale, np.uint8(153)], np.uint8, 2)[0]
        theirs = cpu_session(model, threads=1).run(None, {"in0": x})[0]
        for arithmetic in ("onnxruntime", "directml"):
            ours = dml_ep.InferenceSession(model, arithmetic=arithmetic, engine="onnxruntime").run(None, {"in0": x})[0]
            np.testing.assert_array_equal(ours[finite], theirs[finite], err_msg=f"{arithmetic} at scale {scale}")
            assert (scale != F32(2.0**-4)) or np.array_equal(ours[finite], exact_quantize(x[finite], scale, 153, np.uint8))
    assert module.called == {"mlas"}


# --- DynamicQuantizeLinear: the official node tests and ties -------------------------------------

# Where the exact x / scale lies within half a float32 ulp of a half-integer, not on it: ONNX's
# expected code is the float32 quotient's (a tie, rounded to even), as dml_ep's; the exact ideal differs.
NEAR_TIES = {"test_dynamicquantizelinear": [5], "test_dynamicquantizelinear_expanded": [5]}  # 0.5 / (5/255) = 25.4999991


def _dql_cases():
    return [pytest.param(c, id=c.name) for c in load_model_tests(kind="node") if re.fullmatch(r"test_dynamicquantizelinear\w*", c.name)]


@pytest.mark.parametrize("case", _dql_cases())
def test_official_dynamic_quantize_linear_cases_in_every_build(build, case):
    """Through dml_ep.interop.backend (every DynamicQuantizeLinear or QuantizeLinear node on DirectML):
    both arithmetics give ONNX's expected outputs (the float32 quotient); the exact rounding differs
    from them only at the near-ties named in ``NEAR_TIES``; the numpy engine (the twins) the same."""
    module = build("quantize")
    inputs, expected = ([_normalize_tensor(t) for t in tensors] for tensors in case.data_sets[0])
    for arithmetic in ("onnxruntime", "directml"):
        outputs = {engine: dml_ep.interop.backend.prepare(case.model, "CPU", arithmetic=arithmetic, engine=engine).run(inputs)
                   for engine in ("onnxruntime", "numpy")}
        for compiled, twin in zip(outputs["onnxruntime"], outputs["numpy"], strict=True):
            np.testing.assert_array_equal(compiled, twin, strict=True)
        y, scale, zero_point = outputs["onnxruntime"]
        np.testing.assert_array_equal(scale, expected[1], strict=True)
        np.testing.assert_array_equal(zero_point, expected[2], strict=True)
        np.testing.assert_array_equal(y, expected[0], strict=True)
        ideal = exact_quantize(inputs[0], scale, zero_point, np.uint8)
        assert np.flatnonzero(ideal != expected[0]).tolist() == NEAR_TIES.get(case.name, [])
    assert "mlas" in module.called


def test_dynamic_quantize_linear_ties_match_onnxruntime(build):
    """A range of 255/16 puts the scale at 2^-4 and every (k + 1/2) / 16 on an exact tie: both
    arithmetics give onnxruntime's DynamicQuantizeLinear, at lengths through vector bodies and tails."""
    module = build("quantize")
    ties = (np.arange(-100, 155) + 0.5) / 16
    for n in (*range(1, 20), 255):
        x = np.random.default_rng(n).permutation(ties)[:n]
        x = np.concatenate([[-100 / 16, 155 / 16], x]).astype(F32)  # min and max: scale 2^-4, zero point 100
        outputs = [("y", TensorProto.UINT8), ("y_scale", TensorProto.FLOAT), ("y_zero_point", TensorProto.UINT8)]
        graph = helper.make_graph([helper.make_node("DynamicQuantizeLinear", ["x"], [name for name, _ in outputs])], "dql",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                                  [helper.make_tensor_value_info(name, t, None) for name, t in outputs])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
        theirs = cpu_session(model, threads=1).run(None, {"x": x})
        assert theirs[1] == F32(2.0**-4) and theirs[2] == 100
        for arithmetic in ("onnxruntime", "directml"):
            ours = dml_ep.InferenceSession(model, arithmetic=arithmetic, engine="onnxruntime").run(None, {"x": x})
            for mine, want in zip(ours, theirs, strict=True):
                np.testing.assert_array_equal(mine, want, strict=True, err_msg=f"{arithmetic}, {n} ties")
    assert "mlas" in module.called


# --- the requantize step (kernels.compiled.requantize) ------------------------------------------

# acc * multiplier: exact halves (0.5, 0.25, 1.5, 3/1024) and float32 products a hair from one.
MULTIPLIERS = [0.5, 0.25, 1.5, 3 / 1024, F32(1) / F32(51), F32(5) / F32(255), F32(1) / F32(3)]


@pytest.mark.parametrize("multiplier", MULTIPLIERS, ids=lambda m: f"{float(m):.6g}")
def test_requantize_ties_match_the_twin(build, multiplier):
    """Sums on every side of the output range, int32 and float32, with and without a bias, rows of
    every width up to 60 (the kernel's vector bodies and tails)."""
    module = build("requantize")
    sums = np.arange(-20000, 20000, dtype=np.int64)
    sums = sums[(sums * np.float64(multiplier) > -300) & (sums * np.float64(multiplier) < 300)]
    for columns in (1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 33, 60):
        acc = sums[: sums.size // columns * columns].reshape(-1, columns)
        bias = np.arange(columns, dtype=np.int32) - columns // 2
        for dtype, zero_point in ((np.uint8, 153), (np.int8, -17)):
            for arithmetic in ARITHMETICS:
                for sums_dtype, add in ((np.int32, None), (np.int32, bias), (np.float32, None)):
                    made = [Requantizer(F32(multiplier), F32(1), F32(1), zero_point, dtype, arithmetic, compiled=compiled)
                            for compiled in (False, True)]
                    twin, compiled = (requantize(acc.astype(sums_dtype), add) for requantize in made)
                    np.testing.assert_array_equal(compiled, twin, err_msg=f"{columns} columns, {arithmetic.mode}, bias {add is not None}")
    assert module.called == {"mlas", "directml"}


def test_qlinear_matmul_ties_match_onnxruntime(build):
    """uint8 x uint8 (exact sums in onnxruntime) at scales 2^-3, 2^-4, 2^-6: multiplier 1/2, every
    odd sum an exact tie; both arithmetics give onnxruntime's QLinearMatMul."""
    module = build("requantize")
    rng = np.random.default_rng(7)
    for m, k, n in ((1, 3, 1), (4, 5, 7), (9, 16, 33), (2, 64, 260)):
        a, b = rng.integers(0, 40, (m, k), dtype=np.uint8), rng.integers(0, 40, (k, n), dtype=np.uint8)
        model, feeds = qlinear_matmul(a, F32(2.0**-3), np.uint8(3), b, F32(2.0**-4), np.uint8(5), F32(2.0**-6), np.uint8(128))
        theirs = cpu_session(model, threads=1).run(None, feeds)[0]
        for arithmetic in ("onnxruntime", "directml"):
            ours = dml_ep.InferenceSession(model, arithmetic=arithmetic, engine="onnxruntime").run(None, feeds)[0]
            np.testing.assert_array_equal(ours, theirs, strict=True, err_msg=f"{m}x{k}x{n}, {arithmetic}")
    assert module.called == {"mlas", "directml"}


# --- MatMulIntegerToFloat's scale and bias (kernels.compiled.scale_bias) ------------------------


def test_scale_bias_ties_match_the_twins(build):
    """MLAS's ``float32(float32(acc) * m) + bias``: sums whose float32 product is a tie (m = 1 +
    2^-12 on sums from 2^12: 25 significant bits) or beyond 2^24 (cvtdq2ps's own ties), a bias of
    minus the product (0 when rounded twice, the product's error with one FMA). DirectML's
    ``acc * scale + bias`` rounded once: products on float32 midpoints (odd sums times 2^-24)."""
    from dml_ep.operators.matrix_multiply_integer_to_float import scale_bias_compiled, scale_bias_directml, scale_bias_onnxruntime

    module = build("scale_bias")
    rng = np.random.default_rng(3)
    for columns in (1, 3, 8, 9, 16, 17, 33, 64):
        acc = np.concatenate([4096 + rng.integers(0, 2**20, (20, columns)), 2**24 + rng.integers(0, 2**20, (4, columns)) * 2 + 1,
                              -(2**12 + 1) - rng.integers(0, 2**18, (4, columns))]).astype(np.int32)
        a_scale, b_scale = F32(1 + 2.0**-12), np.full(columns, F32(1))
        b_scale[::2] = F32(1 - 2.0**-13)
        product = np.multiply(acc[5].astype(F32), a_scale * b_scale, dtype=F32)
        for bias in (None, -product, (product * F32(2.0**-20)).astype(F32)):
            compiled = scale_bias_compiled(acc, np.multiply(a_scale, b_scale, dtype=F32), np.zeros(0, F32) if bias is None else bias, True)
            twin = scale_bias_onnxruntime(acc, np.full((1, 1), a_scale), b_scale, bias, False)
            np.testing.assert_array_equal(compiled.view(np.int32), twin.view(np.int32), err_msg=f"{columns} columns, MLAS")
        a_scale, b_scale = F32(2.0**-24), np.full(columns, F32(1))
        for bias in (None, np.full(columns, F32(2.0**-80)), np.full(columns, F32(-(2.0**-80)))):
            offset = np.zeros(0) if bias is None else bias.astype(np.float64)
            compiled = scale_bias_compiled(acc, np.multiply(a_scale, b_scale, dtype=np.float64), offset, False)
            twin = scale_bias_directml(acc, np.full((1, 1), a_scale), b_scale, bias)
            np.testing.assert_array_equal(compiled.view(np.int32), twin.view(np.int32), err_msg=f"{columns} columns, DirectML")
    assert module.called == {"mlas", "directml"}


def test_matmul_integer_to_float_ties_match_onnxruntime(build):
    """uint8 x uint8 MatMulIntegerToFloat at AScale 1 + 2^-12 (sums from 2^12 times it need 25
    bits: ties and near-ties in float32) with a bias: MLAS's arithmetic gives onnxruntime's bits."""
    module = build("scale_bias")
    rng = np.random.default_rng(11)
    for m, k, n in ((3, 64, 1), (5, 80, 9), (7, 96, 33)):
        a, b = rng.integers(100, 256, (m, k), dtype=np.uint8), rng.integers(100, 256, (k, n), dtype=np.uint8)
        bias = -(a.astype(np.int64) @ b.astype(np.int64))[0].astype(F32)  # about minus the first row's product
        operands = [Feed(a), b, F32(1 + 2.0**-12), np.full(n, F32(1)), np.uint8(0), np.uint8(0), bias]
        model, feeds = single_node_model("MatMulIntegerToFloat", operands, np.float32, 2, domain="com.microsoft")
        theirs = cpu_session(model, threads=1).run(None, feeds)[0]
        ours = dml_ep.InferenceSession(model, arithmetic="onnxruntime", engine="onnxruntime").run(None, feeds)[0]
        np.testing.assert_array_equal(ours.view(np.int32), theirs.view(np.int32), err_msg=f"{m}x{k}x{n}")
    assert "mlas" in module.called


# --- QLinearAdd in MLAS's arithmetic (kernels.compiled.quantized_add) ---------------------------

# (sa, sb, sc, za, zb, zc): halves on every odd a + b; rounded ratios; and terms where the codes
# (a, b) = (178, 107) give 9.4999... with MLAS's two FMAs (code 9) but exactly 9.5 with a rounded
# multiply and add (code 10).
ADD_TERMS = [(0.5, 0.5, 1.0, 0, 0, 0), (0.25, 0.75, 0.5, 7, 200, 128), (0.1, 0.07, 0.15, 3, 9, 120), (1 / 51, 1 / 51, 2 / 51, 0, 0, 1),
             (0.5473520159721375, 0.06605524569749832, 0.15434397757053375, 208, 161, 139)]


def _terms(sa, sb, sc, za, zb, zc):
    """MLAS's float32 rAC, rBC and fixed part, as ``mlas_terms`` makes them (A and B unswapped)."""
    from dml_ep.numerics.kernels.float32_fma import fma32

    r_ac, r_bc = F32(sa) / F32(sc), F32(sb) / F32(sc)
    return r_ac, r_bc, F32(zc) - F32(fma32(r_ac, F32(za), r_bc * F32(zb)))


@pytest.mark.parametrize("terms", ADD_TERMS, ids=str)
def test_quantized_add_ties_match_the_twin(build, terms):
    """Every pair of uint8 codes, dense and with B broadcast along the row, against the twin's two
    FMAs (a build without a hardware FMA runs libm's, exact too)."""
    from dml_ep.operators.element_wise_quantized_linear_add import mlas_add

    module = build("quantized_add")
    r_ac, r_bc, fixed = _terms(*terms)
    a = np.repeat(np.arange(256, dtype=np.uint8), 256).reshape(256, 256)  # a[i, j] = i
    for b in (np.ascontiguousarray(a.T), np.broadcast_to(np.arange(256, dtype=np.uint8)[::-1, None], (256, 256))):
        out = np.empty(a.shape, np.uint8)
        span, (a_step, b_step), (a_rows, b_rows) = strided_rows(a.shape, a.strides, b.strides)
        module.add(address(a), a_rows, a_step, address(b), b_rows, b_step, out.reshape(-1), span, r_ac, r_bc, fixed, 0, 255, False)
        np.testing.assert_array_equal(out, mlas_add(a, b, r_ac, r_bc, fixed, np.uint8))


@pytest.mark.parametrize("terms", ADD_TERMS, ids=str)
def test_qlinear_add_ties_match_onnxruntime(build, terms):
    """QLinearAdd on every pair of uint8 codes, in MLAS's arithmetic, against onnxruntime's CPU EP;
    the build's kernel computes it where it has a hardware FMA (else the table, not this build)."""
    module = build("quantized_add")
    sa, sb, sc, za, zb, zc = terms
    a = np.repeat(np.arange(256, dtype=np.uint8), 256).reshape(256, 256)
    model, feeds = qlinear_add(a, F32(sa), np.uint8(za), np.ascontiguousarray(a.T), F32(sb), np.uint8(zb), F32(sc), np.uint8(zc))
    theirs = cpu_session(model, threads=1).run(None, feeds)[0]
    ours = dml_ep.InferenceSession(model, arithmetic="onnxruntime", engine="onnxruntime").run(None, feeds)[0]
    np.testing.assert_array_equal(ours, theirs, strict=True)
    assert ("add" in module.called) == bool(module.HARDWARE_FMA)


# --- depthwise convolution's direct loops and their requantize step (direct_convolution) --------


def test_depthwise_qlinear_conv_ties_match_onnxruntime_and_the_twin(build):
    """A depthwise uint8 x uint8 QLinearConv at scales 2^-3, 2^-4, 2^-6 (multiplier 1/2: every odd
    sum a tie), widths through the direct loops' vector bodies and tails: the build gives the numpy
    engine's codes and onnxruntime's, in both arithmetics."""
    module = build("direct_convolution")
    rng = np.random.default_rng(5)
    for channels, width in ((16, 7), (24, 13), (32, 30)):
        x = rng.integers(0, 9, (1, channels, 6, width), dtype=np.uint8)
        w = rng.integers(0, 9, (channels, 1, 3, 3), dtype=np.uint8)
        model, feeds = qlinear_conv(x, F32(2.0**-3), np.uint8(2), w, F32(2.0**-4), np.uint8(3), F32(2.0**-6), np.uint8(128),
                                    group=channels, pads=[1, 1, 1, 1])
        theirs = cpu_session(model, threads=1).run(None, feeds)[0]
        for arithmetic in ("onnxruntime", "directml"):
            ours, twin = (dml_ep.InferenceSession(model, arithmetic=arithmetic, engine=engine).run(None, feeds)[0]
                          for engine in ("onnxruntime", "numpy"))
            np.testing.assert_array_equal(ours, twin, strict=True, err_msg=f"{channels} channels, width {width}, {arithmetic}")
            np.testing.assert_array_equal(ours, theirs, strict=True, err_msg=f"{channels} channels, width {width}, {arithmetic}")
    assert module.called & {"convolve", "convolve_requantized"}
