"""Cast and CastLike on DirectML's CAST: every pair of the DML EP's types against onnxruntime's
CPU EP and the float-to-integer rule of each arithmetic against hand-computed values (the Cast to
bool, CAST + CLIP1 in the real EP: tests/operators/graphs/test_cast_to_bool.py)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import dml_ep
from dml_ep.operators.cast import ROUNDING
from dml_ep.operators.registration import operator_of
from onnx_builders import Feed, run_dml, run_ort, single_node_model

RNG = np.random.default_rng(63)
TYPES = [np.float16, np.float32, np.float64, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]
SOURCES = [*TYPES, np.bool_]


def bits(shape, dtype):
    """Every bit pattern of ``dtype`` (NaNs, infinities, subnormals), or random bools."""
    if dtype is np.bool_:
        return RNG.integers(0, 2, shape).astype(bool)
    unsigned = np.dtype(f"u{np.dtype(dtype).itemsize}")
    return RNG.integers(0, np.iinfo(unsigned).max, shape, dtype=unsigned, endpoint=True).view(dtype)


def cast_model(x, to, op_type="Cast", opset=21):
    if op_type == "CastLike":
        return single_node_model("CastLike", [Feed(x), np.zeros(1, to)], to, x.ndim, opset=opset)
    return single_node_model("Cast", [Feed(x)], to, x.ndim, opset=opset, to=int(helper.np_dtype_to_tensor_dtype(np.dtype(to))))


def same(ours, theirs):
    """Equal element for element, NaN equal to NaN whatever its payload (the module's residual)."""
    assert ours.dtype == theirs.dtype
    if ours.dtype.kind == "f":
        np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
        ours, theirs = ours[~np.isnan(ours)], theirs[~np.isnan(theirs)]
        as_bits = f"u{ours.itemsize}"
        ours, theirs = ours.view(as_bits), theirs.view(as_bits)  # -0 apart from +0
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.host_sensitive
@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("target", TYPES)
def test_onnxruntime_arithmetic_is_onnxruntimes_cast_for_every_pair(source, target):
    """Every bit pattern of the source, out-of-range floats and NaN to integers included."""
    x = bits((4, 250), source)
    model, feeds = cast_model(x, target)
    session = dml_ep.InferenceSession(model)
    entry, = session.plan.entries
    assert entry.operator == "DML_OPERATOR_CAST", entry.summary()
    same(run_dml(model, feeds, "onnxruntime"), run_ort(model, feeds, "ort"))


@pytest.mark.host_sensitive
@pytest.mark.parametrize("source, target", [(np.int64, np.int32), (np.float32, np.float16), (np.float16, np.float32),
                                            (np.int32, np.float16), (np.bool_, np.float32), (np.float64, np.float32)])
@pytest.mark.parametrize("op_type, opset", [("Cast", 6), ("Cast", 13), ("Cast", 21), ("CastLike", 15), ("CastLike", 21)])
def test_directml_arithmetic_agrees_where_the_conversion_is_defined(source, target, op_type, opset):
    """Rounding to nearest even and integer wraparound: one answer in both arithmetics."""
    x = bits((300,), source)
    model, feeds = cast_model(x, target, op_type, opset)
    same(run_dml(model, feeds, "directml"), run_ort(model, feeds, "ort"))


@pytest.mark.parametrize("target", [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64])
def test_directml_float_to_integer_truncates_clamps_and_sends_nan_to_zero(target):
    info = np.iinfo(target)
    x = np.array([2.9, -2.9, 0.5, -0.5, np.nan, np.inf, -np.inf, 1e30, -1e30, 200.0, -200.0], np.float32)
    toward_zero = [2, -2, 0, 0, 0, info.max, info.min, info.max, info.min, 200, -200]
    expected = np.array([min(max(v, int(info.min)), int(info.max)) for v in toward_zero], dtype=object).astype(target)
    model, feeds = cast_model(x, target)
    np.testing.assert_array_equal(run_dml(model, feeds, "directml"), expected)


def test_float32_to_float16_rounds_to_nearest_even():
    """Halfway between float16 neighbours 1 and 1 + 2**-10: ties go to the even one; overflow is infinity."""
    x = np.array([1 + 2**-11, 1 + 3 * 2**-11, 65519.0, 65520.0, -1e6], np.float32)
    model, feeds = cast_model(x, np.float16)
    np.testing.assert_array_equal(run_dml(model, feeds, "directml"), np.array([1, 1 + 2 * 2**-10, 65504, np.inf, -np.inf], np.float16))


def test_exactness_and_device_precision_follow_the_pair():
    def entry(source, target):
        return dml_ep.InferenceSession(cast_model(np.zeros(2, source), target)[0]).plan.entries[0]
    cases = [((np.float32, np.float16), False, True, ROUNDING), ((np.float16, np.float32), False, True, None),
             ((np.int64, np.float32), False, True, ROUNDING), ((np.int16, np.float32), False, True, None),
             ((np.float32, np.int32), False, False, None), ((np.int64, np.int8), False, True, None)]
    for (source, target), _, exact, precision in cases:
        node = entry(source, target)
        operator = operator_of(node.desc)
        assert operator.exact_for_any_input(node.desc) is exact, (source, target)
        assert operator.device_precision(node.desc) is precision, (source, target)
