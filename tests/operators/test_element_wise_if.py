"""Where on DirectML's ELEMENT_WISE_IF: a selection of every type the DML EP's rows take, the
condition as UINT8, broadcast three ways, bit for bit against onnxruntime's CPU EP and numpy."""

from __future__ import annotations

import numpy as np
import pytest

import dml_ep
from onnx_builders import Feed, planned_node, run_ort, single_node_model

RNG = np.random.default_rng(62)


def bits(shape, dtype):
    unsigned = np.dtype(f"u{np.dtype(dtype).itemsize}")
    return RNG.integers(0, np.iinfo(unsigned).max, shape, dtype=unsigned, endpoint=True).view(dtype)


def where(condition, x, y, opset=19):
    return planned_node("Where", [condition, x, y], x.dtype, 3, opset=opset)


@pytest.mark.host_sensitive
@pytest.mark.parametrize("opset", [9, 16])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int8, np.uint8, np.int32, np.int64, np.uint64])
def test_where_selects_bit_for_bit(dtype, opset):
    """Against numpy's selection, and onnxruntime's where its CPU EP has the type (not uint64)."""
    condition = RNG.integers(0, 2, (2, 1, 5)).astype(bool)
    x, y = bits((3, 1), dtype), bits((2, 3, 5), dtype)  # every float bit pattern: NaN payloads kept
    session, entry, model, feeds = where(condition, x, y, opset)
    assert entry.operator == "DML_OPERATOR_ELEMENT_WISE_IF"
    assert entry.desc.ConditionTensor.DataType.name == "UINT8" and 0 in entry.desc.ATensor.Strides
    ours = session.run(None, feeds)[0]
    expected = np.where(condition, x, y)
    as_bits = f"u{expected.itemsize}"
    np.testing.assert_array_equal(ours.view(as_bits), expected.view(as_bits))
    if dtype is not np.uint64:
        np.testing.assert_array_equal(ours.view(as_bits), run_ort(model, feeds, "ort").view(as_bits))


def test_where_of_float32_needs_feature_level_3_0():
    """ELEMENT_WISE_IF took FLOAT16 only at DML_FEATURE_LEVEL_2_0."""
    condition, x = np.ones(3, bool), np.zeros(3, np.float32)
    model, _ = single_node_model("Where", [Feed(condition), Feed(x), Feed(x)], np.float32, 1)
    entry, = dml_ep.InferenceSession(model, feature_level="2_0").plan.entries
    assert "FLOAT32 is not supported at DML_FEATURE_LEVEL_2_0" in entry.reason
    entry, = dml_ep.InferenceSession(model, feature_level="3_0").plan.entries
    assert entry.operator == "DML_OPERATOR_ELEMENT_WISE_IF"
