"""DML_OPERATOR_FILL_VALUE_SEQUENCE (``dml_ep/operators/fill_value_sequence.py``): DirectML's examples, the value
``start + i * delta`` rounded once, integers wrapping, the desc's rules per feature level, and RotaryEmbedding's two
uses (the signs and the positions)."""

from __future__ import annotations

import numpy as np
import pytest

from dml_ep.core.enums import DML_FEATURE_LEVEL as FL
from dml_ep.core.enums import DML_TENSOR_DATA_TYPE as DT
from dml_ep.core.errors import DescValidationError
from dml_ep.operators.fill_value_sequence import DML_FILL_VALUE_SEQUENCE_OPERATOR_DESC, fill_value_sequence
from dml_ep.operators.importing import tensor
from dml_ep.operators.kernel_state import KernelState


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
