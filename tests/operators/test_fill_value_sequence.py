"""DML_OPERATOR_FILL_VALUE_SEQUENCE (``dml_ep/operators/fill_value_sequence.py``): DirectML's examples, the value
``start + i * delta`` rounded once, integers wrapping, the desc's rules per feature level, and RotaryEmbedding's two
uses (the signs and the positions); ONNX Range on it, bit for bit with onnxruntime's in the "onnxruntime" arithmetic."""

from __future__ import annotations

import numpy as np
import pytest

import dml_ep
from dml_ep.core.enums import DML_FEATURE_LEVEL as FL
from dml_ep.core.enums import DML_TENSOR_DATA_TYPE as DT
from dml_ep.core.errors import DescValidationError
from dml_ep.operators.fill_value_sequence import DML_FILL_VALUE_SEQUENCE_OPERATOR_DESC, fill_value_sequence
from dml_ep.operators.importing import tensor
from dml_ep.operators.kernel_state import KernelState
from dml_ep.ort.reference import cpu_session
from onnx_builders import Feed, single_node_model


def filled(dtype, sizes, start, delta):
    desc = DML_FILL_VALUE_SEQUENCE_OPERATOR_DESC(tensor(dtype, sizes), int(DT.from_numpy(dtype)), start, delta)
    desc.validate()
    return fill_value_sequence(desc, {}, None, KernelState())


def test_directmls_examples():
    np.testing.assert_array_equal(filled(np.float32, (1, 1, 1, 3), 3, 2), [[[[3, 5, 7]]]])
    np.testing.assert_array_equal(filled(np.uint8, (1, 1, 2, 2), 10, -2), [[[[10, 8], [6, 4]]]])


def test_rotary_embeddings_signs_and_positions():
    np.testing.assert_array_equal(filled(np.float16, (2,), -1.0, 2.0), np.array([-1, 1], np.float16))
    positions = filled(np.int64, (1, 1, 1, 5), 0, 1)
    assert positions.dtype == np.int64 and positions.ravel().tolist() == [0, 1, 2, 3, 4]


def test_floats_are_start_plus_index_times_delta_rounded_once():
    start, delta = np.float32(0.1), np.float32(0.3)
    for dtype in (np.float32, np.float16):
        exact = (np.float64(start) + np.arange(3000) * np.float64(delta)).astype(dtype)  # numpy rounds float64 once
        np.testing.assert_array_equal(filled(dtype, (3000,), float(start), float(delta)), exact)


def test_integers_wrap():
    np.testing.assert_array_equal(filled(np.int8, (4,), 126, 1), np.array([126, 127, -128, -127], np.int8))


def test_desc_rules():
    with pytest.raises(DescValidationError):
        DML_FILL_VALUE_SEQUENCE_OPERATOR_DESC(tensor(np.float16, (1, 1, 1, 2)), int(DT.FLOAT32), -1.0, 2.0).validate()  # type mismatch
    one_d = DML_FILL_VALUE_SEQUENCE_OPERATOR_DESC(tensor(np.float16, (2,)), int(DT.FLOAT16), -1.0, 2.0)
    with pytest.raises(DescValidationError):
        one_d.validate(FL.FL_3_1)  # 4 dimensions before 4_0
    one_d.validate(FL.FL_4_0)
    int64 = DML_FILL_VALUE_SEQUENCE_OPERATOR_DESC(tensor(np.int64, (1, 1, 1, 3)), int(DT.INT64), 0, 1)
    with pytest.raises(DescValidationError):
        int64.validate(FL.FL_4_1)  # 64-bit from 5_0
    int64.validate(FL.FL_5_0)
    with pytest.raises(DescValidationError):
        DML_FILL_VALUE_SEQUENCE_OPERATOR_DESC(tensor(np.float32, (1, 1, 1, 3)), int(DT.FLOAT32), 0.0, 1.0).validate(FL.FL_2_0)  # from 2_1


RANGES = [(np.float32, 1.5, 7.0, 0.5), (np.float32, 0.1, 100.0, 0.3), (np.float32, 5.0, -3.0, -0.7), (np.float32, 2.0, 1.0, 1.0),
          (np.int64, -5, 7, 2), (np.int32, 7, -6, -3), (np.int16, 3, 3, 1), (np.int64, -5, 4, 3)]


def range_model(dtype, start, limit, delta):
    """Range of fed scalars (initializers would be folded by onnxruntime before any EP sees the node); the real EP
    reads them on the CPU, dml_ep plans the node from a run's values."""
    return single_node_model("Range", [Feed(np.array(v, dtype)) for v in (start, limit, delta)], dtype, 1, opset=13)


@pytest.mark.host_sensitive
@pytest.mark.parametrize("dtype, start, limit, delta", RANGES)
def test_range_is_planned_as_fill_value_sequence_and_matches_onnxruntime(dtype, start, limit, delta):
    model, feeds = range_model(dtype, start, limit, delta)
    expected = cpu_session(model, threads=1).run(None, feeds)[0]
    session = dml_ep.InferenceSession(model.SerializeToString(), arithmetic="onnxruntime")
    got = session.run(None, feeds)[0]
    planned = [getattr(e, "operator", "empty: falls back") for e in session.plan.entries]  # the last run's
    assert planned == (["DML_OPERATOR_FILL_VALUE_SEQUENCE"] if expected.size else ["empty: falls back"])
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


@pytest.mark.host_sensitive
def test_range_in_directml_arithmetic_is_start_plus_index_times_delta():
    model, feeds = range_model(np.float32, 0.1, 100.0, 0.3)
    got = dml_ep.InferenceSession(model.SerializeToString(), arithmetic="directml").run(None, feeds)[0]
    count = int(np.ceil((100.0 - np.float64(np.float32(0.1))) / np.float64(np.float32(0.3))))
    exact = (np.float64(np.float32(0.1)) + np.arange(count) * np.float64(np.float32(0.3))).astype(np.float32)
    np.testing.assert_array_equal(got, exact)
    onnxruntime = cpu_session(model, threads=1).run(None, feeds)[0]
    assert np.any(got != onnxruntime)  # onnxruntime's running sum rounds at each step
