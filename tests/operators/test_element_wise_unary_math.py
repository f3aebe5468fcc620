from __future__ import annotations

import numpy as np
import pytest

import dml_ep
from dml_ep.numerics.kernels.eigen_log import eigen_log, plog_float
from dml_ep.ort.reference import cpu_session
from onnx_builders import Feed, single_node_model

OPS = {"Exp": "EXP", "Log": "LOG", "Abs": "ABS", "Neg": "NEGATE", "Reciprocal": "RECIP", "Floor": "FLOOR", "Ceil": "CEIL"}
EXACT = {"Exp": np.exp, "Log": np.log, "Abs": np.abs, "Neg": np.negative, "Reciprocal": lambda x: 1 / x, "Floor": np.floor, "Ceil": np.ceil}
# Zeros of both signs, a denormal, halves, negatives, the largest values, infinities, NaN and a spread.
SPECIAL = [0.0, -0.0, 1e-45, 0.5, -0.5, 2.5, -2.5, 1.0, -3.0, 65504.0, -65504.0, np.inf, -np.inf, np.nan]


def inputs(dtype) -> np.ndarray:
    spread = np.random.default_rng(0).uniform(-90, 90, 3000)
    return np.concatenate([SPECIAL, spread]).astype(dtype).reshape(1, -1)


def run(op: str, x: np.ndarray, arithmetic: str, opset: int = 13):
    model, feeds = single_node_model(op, [Feed(x)], x.dtype.type, 2, opset=opset)
    session = dml_ep.InferenceSession(model.SerializeToString(), arithmetic=arithmetic)
    return session, model, feeds, session.run(None, feeds)[0]


def assert_same_bits(actual: np.ndarray, expected: np.ndarray, nan_bits: bool = True) -> None:
    assert actual.dtype == expected.dtype
    if not nan_bits:  # a NaN for a NaN, whatever its payload
        np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
        actual, expected = np.where(np.isnan(actual), 0, actual), np.where(np.isnan(expected), 0, expected)
    np.testing.assert_array_equal(actual.view(f"u{actual.itemsize}"), expected.view(f"u{expected.itemsize}"))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("op", list(OPS))
def test_directml_is_the_function_rounded_once(op, dtype):
    x = inputs(dtype)
    session, _, _, y = run(op, x, "directml", opset=6)
    assert [entry.operator for entry in session.plan.entries] == [f"DML_OPERATOR_ELEMENT_WISE_{OPS[op]}"]
    with np.errstate(all="ignore"):
        exact = EXACT[op](x.astype(np.float64)).astype(dtype)
    assert_same_bits(y, exact, nan_bits=False)  # signed zeros too


@pytest.mark.host_sensitive
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("op", list(OPS))
def test_onnxruntime_arithmetic_matches_onnxruntime_bit_for_bit(op, dtype):
    """Exp is MLAS's FMA3 kernel, Log Eigen's SSE2 plog, the others exact; float16 through float32."""
    x = inputs(dtype)
    _, model, feeds, y = run(op, x, "onnxruntime")
    assert_same_bits(y, cpu_session(model, threads=1).run(None, feeds)[0])


@pytest.mark.host_sensitive
@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("size", [65536, 65531])
def test_every_float16_value_matches_onnxruntime(op, size):
    """NaNs as onnxruntime's Casts write them: quieted, payloads kept, but in the last size % 8 canonical."""
    x = np.arange(65536, dtype=np.uint16).view(np.float16)[-size:].reshape(1, -1)
    _, model, feeds, y = run(op, x, "onnxruntime")
    assert_same_bits(y, cpu_session(model, threads=1).run(None, feeds)[0])


@pytest.mark.host_sensitive
@pytest.mark.parametrize("op", list(OPS))
def test_float32_bit_patterns_match_onnxruntime(op):
    x = np.arange(0, 2**32, 99991, dtype=np.uint64).astype(np.uint32).view(np.float32).reshape(1, -1)
    _, model, feeds, y = run(op, x, "onnxruntime")
    assert_same_bits(y, cpu_session(model, threads=1).run(None, feeds)[0])


def test_log_ends_on_scalar_std_log_as_onnxruntime():
    """Values where Eigen's polynomial and the rounded log differ: the last size % 4 are std::log's."""
    x = np.random.default_rng(3).uniform(0.5, 80, 20000).astype(np.float32)
    differs = x[plog_float(x) != np.log(x.astype(np.float64)).astype(np.float32)][:7].reshape(1, -1)
    y = run("Log", differs, "onnxruntime")[3]
    np.testing.assert_array_equal(y[0, :4], eigen_log(differs[0, :4]))
    np.testing.assert_array_equal(y[0, 4:], np.log(differs[0, 4:].astype(np.float64)).astype(np.float32))
    assert (y[0, 4:] != plog_float(differs[0, 4:])).all()


@pytest.mark.host_sensitive
def test_eigen_log_matches_onnxruntime_over_float32_bit_patterns():
    x = np.arange(0, 2**32, 99991, dtype=np.uint64).astype(np.uint32).view(np.float32).reshape(1, -1)
    model, feeds = single_node_model("Log", [Feed(x)], np.float32, 2)
    assert_same_bits(eigen_log(x), cpu_session(model, threads=1).run(None, feeds)[0])


def test_onnxruntime_exp_and_log_are_not_the_correctly_rounded_ones():
    """The two arithmetics differ: onnxruntime's exp is within 1 ULP of the rounded one, its log within 2."""
    x = np.random.default_rng(1).uniform(0.5, 80, (1, 4000)).astype(np.float32)
    for op, most in (("Exp", 1), ("Log", 2)):
        directml, onnxruntime = run(op, x, "directml")[3], run(op, x, "onnxruntime")[3]
        differ = directml != onnxruntime
        assert differ.any()
        ulps = np.abs(directml.view(np.int32).astype(np.int64) - onnxruntime.view(np.int32))
        assert ulps.max() == most, (op, ulps.max())


def test_reciprocal_of_zero_is_infinite_and_of_nan_nan():
    _, _, _, y = run("Reciprocal", np.array([[0.0, -0.0, np.nan, 4.0]], np.float32), "directml")
    assert y[0, 0] == np.inf and y[0, 1] == -np.inf and np.isnan(y[0, 2]) and y[0, 3] == 0.25


@pytest.mark.host_sensitive
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int16, np.int8])
@pytest.mark.parametrize("op", ["Abs", "Neg"])
def test_signed_integer_abs_and_neg_wrap_as_onnxruntime(op, dtype):
    """T5's relative-position buckets take an int64 Abs; the most negative value is its own abs and negation."""
    info = np.iinfo(dtype)
    x = np.array([[info.min, info.min + 1, -7, -1, 0, 1, 7, info.max]], dtype)
    for arithmetic in ("directml", "onnxruntime"):
        session, model, feeds, y = run(op, x, arithmetic)
        assert [entry.operator for entry in session.plan.entries] == [f"DML_OPERATOR_ELEMENT_WISE_{OPS[op]}"]
        np.testing.assert_array_equal(y, cpu_session(model, threads=1).run(None, feeds)[0])
        assert y[0, 0] == info.min and y[0, 4] == 0


def test_an_unsigned_abs_runs_on_the_cpu_as_in_the_real_ep():
    """The DML EP registers Abs for floats and signed integers only."""
    model, _ = single_node_model("Abs", [Feed(np.ones((2, 3), np.uint8))], np.uint8, 2)
    [entry] = dml_ep.InferenceSession(model.SerializeToString()).plan.entries
    assert entry.kind == "types" and entry.reason.endswith("on the CPU in the real EP too")


def test_a_double_exp_runs_on_the_cpu_as_in_the_real_ep():
    model, _ = single_node_model("Exp", [Feed(np.ones((2, 3)))], np.float64, 2)
    [entry] = dml_ep.InferenceSession(model.SerializeToString()).plan.entries
    assert entry.kind == "types" and entry.reason.endswith("on the CPU in the real EP too")


def test_device_precision_names_its_sources():
    from dml_ep.operators import element_wise_unary_math as unary
    from dml_ep.operators.registration import OPERATORS

    exp = OPERATORS[unary.DML_ELEMENT_WISE_EXP_OPERATOR_DESC.OPERATOR_TYPE].device_precision
    assert (exp.ulp32, exp.ulp16) == (32, 1) and "WebNN" in exp.rule and "D3D" in exp.rule
    assert OPERATORS[unary.DML_ELEMENT_WISE_LOG_OPERATOR_DESC.OPERATOR_TYPE].device_precision.atol32 == 1 / 1024
    assert OPERATORS[unary.DML_ELEMENT_WISE_FLOOR_OPERATOR_DESC.OPERATOR_TYPE].device_precision is None
