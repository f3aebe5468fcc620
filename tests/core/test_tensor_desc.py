"""DML_BUFFER_TENSOR_DESC, the shape helpers and the tensor enums, against DML_OPERATORS.md
("Buffer tensor desc rules", "Enum values"); expected sizes are computed by hand in each case."""

import numpy as np
import pytest

from dml_ep.core.enums import DML_TENSOR_DATA_TYPE as DT
from dml_ep.core.enums import DML_TENSOR_FLAGS, DML_TENSOR_TYPE
from dml_ep.core.tensor_desc import (DML_BUFFER_TENSOR_DESC, broadcast_desc, broadcast_shapes, broadcast_strides, calc_buffer_tensor_size, left_pad,
    packed_strides, view)


def test_tensor_enum_values_match_directml_h():
    assert {t.name: t.value for t in DT} == {
        "UNKNOWN": 0, "FLOAT32": 1, "FLOAT16": 2, "UINT32": 3, "UINT16": 4, "UINT8": 5, "INT32": 6,
        "INT16": 7, "INT8": 8, "FLOAT64": 9, "UINT64": 10, "INT64": 11, "UINT4": 12, "INT4": 13,
    }  # fmt: skip
    assert (DML_TENSOR_TYPE.INVALID, DML_TENSOR_TYPE.BUFFER) == (0, 1)
    assert (DML_TENSOR_FLAGS.NONE, DML_TENSOR_FLAGS.OWNED_BY_DML) == (0, 1)


def test_data_type_numpy_round_trip():
    assert DT.from_numpy(np.uint8) is DT.UINT8
    assert DT.from_numpy(np.float16) is DT.FLOAT16
    assert DT.from_numpy(np.bool_) is DT.UNKNOWN
    assert DT.INT8.numpy() == np.int8
    assert [DT.FLOAT64.element_size, DT.FLOAT16.element_size, DT.INT4.element_size] == [8, 2, 1]


@pytest.mark.parametrize(
    "data_type, sizes, strides, expected",
    [
        (DT.FLOAT32, (1, 3, 5, 7), None, 105 * 4),  # packed: prod(sizes) * 4
        (DT.UINT8, (1, 1, 3, 3), None, 12),  # 9 bytes rounded up to 12
        (DT.FLOAT16, (3,), None, 8),  # 6 bytes rounded up to 8
        (DT.INT32, (2,), None, 8),
        (DT.FLOAT32, (2, 3), (1, 2), 24),  # last element index 1*1 + 2*2 = 5, so 6 elements
        (DT.UINT8, (2, 3), (4, 1), 8),  # padded rows: last index 4 + 2 = 6, 7 bytes -> 8
        (DT.FLOAT32, (1, 3, 4, 4), (0, 0, 0, 0), 4),  # broadcast scalar: one element
        (DT.UINT8, (1, 1, 1, 1), (0, 0, 0, 0), 4),  # one byte, rounded up to 4
        (DT.FLOAT32, (2, 3), (0, 1), 12),  # a row of 3 read twice
    ],
)
def test_total_tensor_size_per_dml_calc_buffer_tensor_size(data_type, sizes, strides, expected):
    assert calc_buffer_tensor_size(data_type, sizes, strides) == expected
    desc = DML_BUFFER_TENSOR_DESC.create(data_type, sizes, strides)
    assert desc.TotalTensorSizeInBytes == expected
    assert desc.DimensionCount == len(sizes)
    assert desc.TotalTensorSizeInBytes % 4 == 0


def test_packed_strides_are_stored_as_none():
    assert packed_strides((2, 3, 4)) == (12, 4, 1)
    explicit = DML_BUFFER_TENSOR_DESC.create(DT.FLOAT32, (2, 3, 4), (12, 4, 1))
    implicit = DML_BUFFER_TENSOR_DESC.create(DT.FLOAT32, (2, 3, 4))
    assert explicit.Strides is None
    assert explicit == implicit
    assert explicit.element_strides == (12, 4, 1)
    strided = DML_BUFFER_TENSOR_DESC.create(DT.FLOAT32, (2, 3), (1, 2))
    assert strided.Strides == (1, 2)


def test_desc_defaults_and_flags():
    desc = DML_BUFFER_TENSOR_DESC.create(DT.INT8, (6, 2, 3, 3), flags=DML_TENSOR_FLAGS.OWNED_BY_DML)
    assert desc.Flags == DML_TENSOR_FLAGS.OWNED_BY_DML
    assert desc.GuaranteedBaseOffsetAlignment == 0
    assert desc.element_count == 108
    assert desc.describe() == "INT8 {6,2,3,3}"
    assert DML_BUFFER_TENSOR_DESC.create(DT.FLOAT32, (2, 3), (0, 1)).describe() == "FLOAT32 {2,3} strides {0,1}"


def test_left_pad():
    assert left_pad((3, 4)) == (1, 1, 3, 4)
    assert left_pad((2,), 3) == (1, 1, 2)
    assert left_pad((1, 2, 3, 4)) == (1, 2, 3, 4)


@pytest.mark.parametrize(
    "shape, target, expected",
    [
        ((2, 3), (2, 3), (3, 1)),  # no broadcast: packed
        ((3,), (2, 3), (0, 1)),  # missing leading dim reads the row again
        ((2, 1), (2, 3), (1, 0)),
        ((1, 3, 1), (2, 3, 4), (0, 1, 0)),
        # DML EP rule: once anything broadcasts, a size-1 dim that does not broadcast gets 0 too.
        ((1, 1, 3), (2, 1, 3), (0, 0, 1)),
        ((1,), (1, 2, 2), (0, 0, 0)),
    ],
)
def test_broadcast_strides(shape, target, expected):
    assert broadcast_strides(shape, target) == expected


@pytest.mark.parametrize("shape, target", [((4,), (2, 3)), ((2, 2, 3), (2, 3)), ((2, 3), (3, 3))])
def test_broadcast_strides_rejects_shapes_that_do_not_broadcast(shape, target):
    with pytest.raises(ValueError):
        broadcast_strides(shape, target)


def test_broadcast_desc_and_shapes():
    desc = broadcast_desc(DT.FLOAT32, (3,), (1, 1, 2, 3))
    assert (desc.Sizes, desc.Strides) == ((1, 1, 2, 3), (0, 0, 0, 1))
    assert desc.TotalTensorSizeInBytes == 12  # three floats are read
    assert broadcast_shapes((2, 1), (3,)) == (2, 3)
    with pytest.raises(ValueError):
        broadcast_shapes((2,), (3,))


def test_view_reads_through_strides():
    buffer = np.arange(6, dtype=np.float32)
    transposed = DML_BUFFER_TENSOR_DESC.create(DT.FLOAT32, (3, 2), (1, 3))
    np.testing.assert_array_equal(view(buffer, transposed), [[0, 3], [1, 4], [2, 5]])
    packed = DML_BUFFER_TENSOR_DESC.create(DT.FLOAT32, (2, 3))
    np.testing.assert_array_equal(view(buffer, packed), [[0, 1, 2], [3, 4, 5]])


def test_view_broadcasts_with_zero_strides_and_is_read_only():
    row = np.array([1, 2, 3], np.uint8)
    result = view(row, broadcast_desc(DT.UINT8, (3,), (2, 3)))
    np.testing.assert_array_equal(result, [[1, 2, 3], [1, 2, 3]])
    with pytest.raises(ValueError):
        result[0, 0] = 9
    scalar = view(np.array([7], np.int8), DML_BUFFER_TENSOR_DESC.create(DT.INT8, (1, 2, 2), (0, 0, 0)))
    np.testing.assert_array_equal(scalar, np.full((1, 2, 2), 7))


def test_view_rejects_a_buffer_too_small_for_the_desc():
    with pytest.raises(ValueError, match="too small"):
        view(np.zeros(5, np.float32), DML_BUFFER_TENSOR_DESC.create(DT.FLOAT32, (2, 3)))
