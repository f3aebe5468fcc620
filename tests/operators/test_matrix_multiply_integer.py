"""MATRIX_MULTIPLY_INTEGER (MatMulInteger) and MATRIX_MULTIPLY_INTEGER_TO_FLOAT (MatMulIntegerToFloat).

References: onnxruntime's CPU EP, bit for bit in the onnxruntime arithmetic (both operators), the
exact sums (MatMulInteger, both arithmetics), hand-computed u8s8 saturation, and for
MatMulIntegerToFloat's directml arithmetic the correctly rounded exact value (exact fractions).
"""

import re
from fractions import Fraction

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.backend.test.loader import load_model_tests
from onnx.backend.test.runner import _normalize_tensor

import dml_ep
import dml_ep.interop.backend
from dml_ep.conformance.compare import compare_model
from dml_ep.core.errors import QuantizationParameterError
from dml_ep.numerics.arithmetic import host_saturates_u8s8
from dml_ep.numerics.kernels.u8s8 import matmul_correction
from dml_ep.operators.matrix_multiply_integer_to_float import scale_bias_directml
from dml_ep.operators.nodes import DmlNode
from onnx_builders import Feed, run_ort, single_node_model

U8, S8 = np.uint8, np.int8
RNG = np.random.default_rng(7)


def codes(dtype, shape):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, size=shape).astype(dtype)


def exact_sums(a, b, za, zb):
    """sum_k (a - za) (b - zb) in int64, za per tensor or per row ([M, 1]), zb per tensor or per column."""
    return np.matmul(np.asarray(a, np.int64) - np.asarray(za, np.int64), np.asarray(b, np.int64) - np.asarray(zb, np.int64))


def session(model, arithmetic="onnxruntime", **options):
    return dml_ep.InferenceSession(model, arithmetic=arithmetic, **options)


def run_on_directml(model, feeds, operator, arithmetic="onnxruntime", **options):
    """dml_ep's output, asserting the node ran as ``operator``."""
    sess = session(model, arithmetic, **options)
    y = sess.run(None, feeds)[0]
    assert [e.desc.OPERATOR_TYPE.name for e in sess.plan.entries if isinstance(e, DmlNode)] == [operator]
    return y


def assert_same(actual, expected):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    mismatch = np.flatnonzero(actual.view(np.int32) != expected.view(np.int32)) if actual.dtype.itemsize == 4 else np.flatnonzero(actual != expected)
    assert mismatch.size == 0, f"{mismatch.size}/{actual.size} differ: {actual.reshape(-1)[mismatch[:5]]} vs {expected.reshape(-1)[mismatch[:5]]}"


# --- MatMulInteger ---------------------------------------------------------------------------


def matmul_integer(a, b, za=None, zb=None):
    out_rank = np.matmul(np.zeros(np.shape(a.value if isinstance(a, Feed) else a)), np.zeros(np.shape(b.value if isinstance(b, Feed) else b))).ndim
    return single_node_model("MatMulInteger", [a, b, za, zb], np.int32, out_rank)


CASES = [  # a type, b type, A shape, B shape, per-column b zero point
    (U8, S8, (3, 16), (16, 5), True),
    (U8, U8, (2, 3, 7, 9), (9, 4), False),
    (S8, S8, (5, 8), (8, 6), True),
    (U8, S8, (2, 1, 3, 8), (4, 8, 5), False),  # batch broadcasting both ways
    (U8, U8, (2, 4, 24), (2, 24, 12), False),  # a B per batch
    (U8, S8, (8,), (8, 3), True),  # 1-D A
    (U8, S8, (1, 7, 384), (384, 1536), True),
]


@pytest.mark.host_sensitive
@pytest.mark.parametrize("a_type, b_type, a_shape, b_shape, per_column", CASES)
@pytest.mark.parametrize("a_zero_point", ["constant", "fed", None])
def test_matmul_integer_matches_onnxruntime(a_type, b_type, a_shape, b_shape, per_column, a_zero_point):
    a, b = codes(a_type, a_shape), codes(b_type, b_shape)
    za = codes(a_type, ())
    zb = codes(b_type, (b_shape[-1],) if per_column else ())
    za_operand = None if a_zero_point is None else Feed(za) if a_zero_point == "fed" else za
    model, feeds = matmul_integer(Feed(a), b, za_operand, zb)
    expected = run_ort(model, feeds, "ort")
    exact = exact_sums(a, b, 0 if a_zero_point is None else za, zb)
    assert_same(run_on_directml(model, feeds, "MATRIX_MULTIPLY_INTEGER"), expected)
    assert_same(run_on_directml(model, feeds, "MATRIX_MULTIPLY_INTEGER", "directml"), exact.astype(np.int32))
    assert np.array_equal(expected, exact + hosts_u8s8_saturation(a, b))


def hosts_u8s8_saturation(a, b):
    """What the host's onnxruntime adds to exact uint8 x int8 sums: kernels/u8s8.py's pairs, on a
    host that saturates them (AVX2 without VNNI), else nothing."""
    if a.dtype == U8 and b.dtype == S8 and host_saturates_u8s8():
        return matmul_correction(a.reshape(-1, a.shape[-1]) if a.ndim == 1 else a, b).reshape(np.matmul(a.astype(np.int64), b).shape)
    return 0


@pytest.mark.host_sensitive
def test_matmul_integer_run_time_b_and_zero_points():
    """B and both zero points fed: the B zero point is taken off after the product."""
    a, b = codes(U8, (2, 5, 12)), codes(S8, (12, 7))
    za, zb = codes(U8, ()), codes(S8, (7,))
    model, feeds = matmul_integer(Feed(a), Feed(b), Feed(za), Feed(zb))
    y = run_on_directml(model, feeds, "MATRIX_MULTIPLY_INTEGER")
    assert_same(y, run_ort(model, feeds, "ort"))
    feeds["in3"] = codes(S8, (7,))  # a new zero point at the next run of the same session
    sess = session(model)
    assert_same(sess.run(None, feeds)[0], (exact_sums(a, b, za, feeds["in3"]) + hosts_u8s8_saturation(a, b)).astype(np.int32))
    assert_same(session(model, "directml").run(None, feeds)[0], exact_sums(a, b, za, feeds["in3"]).astype(np.int32))


@pytest.mark.host_sensitive
def test_matmul_integer_per_row_a_zero_point():
    """A per-row A zero point ([M, 1]): DirectML's {1,1,M,1}; onnxruntime takes only a scalar."""
    a, b = codes(U8, (4, 10)), codes(S8, (10, 3))
    za = codes(U8, (4, 1))
    for za_operand in (za, Feed(za)):
        model, feeds = matmul_integer(Feed(a), b, za_operand, np.int8(-3))
        for arithmetic, saturation in (("onnxruntime", hosts_u8s8_saturation(a, b)), ("directml", 0)):
            y = run_on_directml(model, feeds, "MATRIX_MULTIPLY_INTEGER", arithmetic)
            assert_same(y, (exact_sums(a, b, za, -3) + saturation).astype(np.int32))


def test_matmul_integer_u8s8_pairs_saturate():
    """255 x 127 + 255 x 127 = 64770 saturates to 32767 (VPMADDUBSW); the zero points apply after."""
    a, b = np.full((2, 4), 255, U8), np.full((4, 3), 127, S8)
    model, feeds = matmul_integer(Feed(a), b, np.uint8(5), None)
    saturated = run_on_directml(model, feeds, "MATRIX_MULTIPLY_INTEGER", u8s8_saturation=True)
    assert np.all(saturated == 2 * 32767 - 5 * 4 * 127)
    assert np.all(run_on_directml(model, feeds, "MATRIX_MULTIPLY_INTEGER", "directml") == 4 * 250 * 127)


def test_matmul_integer_per_batch_zero_point_falls_back():
    a, b = codes(U8, (2, 3, 4)), codes(U8, (2, 4, 5))
    model, feeds = matmul_integer(Feed(a), b, codes(U8, (2, 3, 1)), None)
    sess = session(model)
    (entry,) = sess.plan.entries
    assert not isinstance(entry, DmlNode) and "one per batch" in entry.reason


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in load_model_tests(kind="node") if re.match(r"^test_matmulinteger", c.name)])
def test_official_matmulinteger_runs_on_directml(case):
    """Every input is a graph input in the official case, the zero points too: bound at run time."""
    rep = dml_ep.interop.backend.prepare(case.model)
    (entry,) = rep.session.plan.entries
    assert isinstance(entry, DmlNode) and entry.desc.OPERATOR_TYPE.name == "MATRIX_MULTIPLY_INTEGER"
    for inputs, expected in case.data_sets:
        (y,) = rep.run([_normalize_tensor(t) for t in inputs])
        np.testing.assert_array_equal(y, _normalize_tensor(expected[0]))


# --- MatMulIntegerToFloat --------------------------------------------------------------------


def to_float(a, b, a_scale, b_scale, za=None, zb=None, bias=None):
    shape = lambda x: np.shape(x.value if isinstance(x, Feed) else x)  # noqa: E731
    out_rank = np.matmul(np.zeros(shape(a)), np.zeros(shape(b))).ndim
    return single_node_model("MatMulIntegerToFloat", [a, b, a_scale, b_scale, za, zb, bias], np.float32, out_rank, domain="com.microsoft")


def scales(shape):
    return RNG.uniform(1e-3, 0.05, size=shape).astype(np.float32)


TO_FLOAT_CASES = [  # a type, b type, A shape, B shape, per-column b scale and zero point, bias
    (U8, S8, (1, 7, 384), (384, 1536), True, True),
    (U8, S8, (3, 33), (33, 17), False, True),
    (U8, U8, (2, 3, 33), (33, 17), True, False),
    (S8, S8, (4, 100), (100, 50), True, True),
    (U8, S8, (2, 4, 24), (2, 24, 12), True, True),  # batched B, per-column b_scale: scaled after the bias
    (U8, U8, (2, 4, 24), (2, 24, 12), False, False),
    (U8, S8, (3, 1024), (1024, 16), False, False),
]


@pytest.mark.host_sensitive
@pytest.mark.parametrize("a_type, b_type, a_shape, b_shape, per_column, with_bias", TO_FLOAT_CASES)
@pytest.mark.parametrize("fed", [True, False], ids=["scale_zp_fed", "scale_zp_constant"])
def test_matmul_integer_to_float_matches_onnxruntime(a_type, b_type, a_shape, b_shape, per_column, with_bias, fed):
    a, b = codes(a_type, a_shape), codes(b_type, b_shape)
    n = b_shape[-1]
    a_scale, za = scales(()), codes(a_type, ())
    b_scale, zb = scales((n,) if per_column else ()), codes(b_type, (n,) if per_column and len(b_shape) == 2 else ())
    bias = RNG.normal(size=n).astype(np.float32) if with_bias else None
    model, feeds = to_float(Feed(a), b, Feed(a_scale) if fed else a_scale, b_scale, Feed(za) if fed else za, zb, bias)
    assert_same(run_on_directml(model, feeds, "MATRIX_MULTIPLY_INTEGER_TO_FLOAT"), run_ort(model, feeds, "ort"))


@pytest.mark.host_sensitive
def test_matmul_integer_to_float_per_row_a_scale_matches_onnxruntime():
    """A per-row a_scale [M, 1]: onnxruntime multiplies it in after the bias (ScaleOutput)."""
    a, b = codes(U8, (6, 40)), codes(S8, (40, 9))
    model, feeds = to_float(Feed(a), b, scales((6, 1)), scales((9,)), np.uint8(128), None, RNG.normal(size=9).astype(np.float32))
    assert_same(run_on_directml(model, feeds, "MATRIX_MULTIPLY_INTEGER_TO_FLOAT"), run_ort(model, feeds, "ort"))


def test_matmul_integer_to_float_u8s8_pairs_saturate():
    a, b = np.full((2, 4), 255, U8), np.full((4, 3), 127, S8)
    model, feeds = to_float(Feed(a), b, np.float32(0.5), np.float32(0.25), np.uint8(0), None, np.full(3, 1, np.float32))
    saturated = run_on_directml(model, feeds, "MATRIX_MULTIPLY_INTEGER_TO_FLOAT", u8s8_saturation=True)
    assert np.all(saturated == 2 * 32767 * 0.125 + 1)
    assert np.all(run_on_directml(model, feeds, "MATRIX_MULTIPLY_INTEGER_TO_FLOAT", "directml") == 4 * 255 * 127 * 0.125 + 1)


def test_matmul_integer_to_float_checks_a_run_time_scale():
    model, feeds = to_float(Feed(codes(U8, (2, 4))), codes(S8, (4, 3)), Feed(np.float32(0)), np.float32(0.5))
    with pytest.raises(QuantizationParameterError, match="not positive"):
        session(model).run(None, feeds)


def test_directml_is_the_correctly_rounded_value():
    """acc * AScale * BScale + Bias rounded once to float32, ties to even, against exact fractions."""
    acc = RNG.integers(-2**31, 2**31, size=(64, 32))
    acc[:4, :4] = 2**24 + 1  # a float32 midpoint: to even
    a_scale, b_scale = np.float32(0.0123), scales((1, 32))
    b_scale[0, :4] = 1.0
    bias = RNG.normal(size=(1, 32)).astype(np.float32)
    bias[0, :4] = 0.0
    y = scale_bias_directml(acc, np.full((1, 1), a_scale), b_scale, bias)
    for index in [(0, 0), *zip(RNG.integers(0, 64, 200), RNG.integers(0, 32, 200))]:
        exact = Fraction(int(acc[index])) * Fraction(float(a_scale)) * Fraction(float(b_scale[0, index[1]])) + Fraction(float(bias[0, index[1]]))
        assert y[index] == nearest_float32(exact)
    # hand-computed: 1 + 2^-24 is a tie between 1 and 1 + 2^-23 (to even: 1); a bias of 2^-80 on
    # top is lost in float64 (which would round to 1 again), yet puts the exact value above the tie.
    one = np.ones((1, 1), np.float32)
    assert scale_bias_directml(np.array([[2**24 + 1]]), one, np.full((1, 1), 2**-24, np.float32), None)[0, 0] == 1.0
    above = scale_bias_directml(np.array([[2**24 + 1]]), one, np.full((1, 1), 2**-24, np.float32), np.full((1, 1), 2**-80, np.float32))
    assert above[0, 0] == np.float32(1 + 2**-23)


def nearest_float32(exact: Fraction) -> np.float32:
    """The float32 nearest to ``exact`` by bisection over the ordered float32 bit patterns, ties to even."""
    low, high = np.float32(-np.finfo(np.float32).max), np.float32(np.finfo(np.float32).max)
    lo_bits, hi_bits = ordered(low), ordered(high)
    while hi_bits - lo_bits > 1:  # invariant: float(lo) <= exact <= float(hi)
        mid = (lo_bits + hi_bits) // 2
        if Fraction(float(unordered(mid))) <= exact:
            lo_bits = mid
        else:
            hi_bits = mid
    lo, hi = unordered(lo_bits), unordered(hi_bits)
    d_lo, d_hi = exact - Fraction(float(lo)), Fraction(float(hi)) - exact
    if d_lo != d_hi:
        return lo if d_lo < d_hi else hi
    return lo if int(np.array(lo).view(np.uint32)) % 2 == 0 else hi


def ordered(x: np.float32) -> int:
    bits = int(np.array(x, np.float32).view(np.int32))
    return bits if bits >= 0 else -(bits & 0x7FFFFFFF)


def unordered(n: int) -> np.float32:
    bits = n if n >= 0 else (-n) | -0x80000000
    return np.array(bits, np.int32).view(np.float32)[()]


# --- DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul -> Add (quantize_dynamic) ----------


def dynamic_chain(x, b, b_scale, b_zp, bias):
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
        helper.make_node("MatMulInteger", ["xq", "b", "xz", "bz"], ["acc"]),
        helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["xs", "bs"], ["scale"]),
        helper.make_node("Mul", ["accf", "scale"], ["scaled"]),
        helper.make_node("Add", ["scaled", "bias"], ["y"]),
    ]
    initializers = [numpy_helper.from_array(v, n) for n, v in (("b", b), ("bs", b_scale), ("bz", b_zp), ("bias", bias))]
    graph = helper.make_graph(nodes, "quantize_dynamic", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.host_sensitive
@pytest.mark.parametrize("per_column", [False, True])
def test_dynamic_quantize_chain_runs_as_matmul_integer_to_float(per_column):
    """dml_ep fuses the chain into DynamicQuantizeLinear + MatMulIntegerToFloat (the DML EP's
    MatMulIntegerToFloatFusion), onnxruntime's CPU EP into DynamicQuantizeMatMul: bit-identical."""
    x = RNG.normal(size=(1, 7, 384)).astype(np.float32)
    b = codes(S8, (384, 256))
    b_scale = scales((256,) if per_column else ())
    model = dynamic_chain(x, b, b_scale, codes(S8, b_scale.shape), RNG.normal(size=256).astype(np.float32))
    sess = session(model)
    (entry,) = [e for e in sess.plan.entries if e.node.op_type == "MatMulIntegerToFloat"]
    assert isinstance(entry, DmlNode) and entry.desc.OPERATOR_TYPE.name == "MATRIX_MULTIPLY_INTEGER_TO_FLOAT"
    assert not entry.desc.AScaleTensor.Flags, "the scale of the DynamicQuantizeLinear comes at run time"
    assert_same(sess.run(None, {"x": x})[0], run_ort(model, {"x": x}, "ort"))


# --- compare ---------------------------------------------------------------------------------


@pytest.mark.host_sensitive
@pytest.mark.parametrize("arithmetic", ["onnxruntime", "directml"])
def test_compare_classifies_both_operators(arithmetic):
    """DirectML's exact sums against ort-exact: plain "ort" saturates u8s8 pairs on AVX2 CPUs
    without VNNI, which onnxruntime's arithmetic follows."""
    reference = "ort-exact" if arithmetic == "directml" else "ort"
    x = RNG.normal(size=(3, 64)).astype(np.float32)
    model = dynamic_chain(x, codes(S8, (64, 16)), scales((16,)), codes(S8, (16,)), RNG.normal(size=16).astype(np.float32))
    report = compare_model(model, {"x": x}, reference=reference, arithmetic=arithmetic, per_node=True)
    assert report.ok
    integer, _ = matmul_integer(Feed(codes(U8, (3, 64))), codes(S8, (64, 16)), codes(U8, ()), codes(S8, (16,)))
    a = {"in0": codes(U8, (3, 64))}
    assert compare_model(integer, a, reference=reference, arithmetic=arithmetic, per_node=True).ok
