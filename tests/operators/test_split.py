"""DML_OPERATOR_SPLIT (``dml_ep/operators/split.py``): the desc's rules per feature level, the kernel against numpy's
split of the input, and com.microsoft.dml DmlSplit's import (RotaryEmbedding's graph plans it)."""

from __future__ import annotations

import numpy as np
import pytest

from dml_ep.core.enums import DML_FEATURE_LEVEL as FL
from dml_ep.core.errors import DescValidationError
from dml_ep.operators.importing import tensor
from dml_ep.operators.kernel_state import KernelState
from dml_ep.operators.split import DML_SPLIT_OPERATOR_DESC, split


def desc(sizes, parts, axis, dtype=np.float16, strides=None):
    outputs = tuple(tensor(dtype, tuple(p if d == axis else n for d, n in enumerate(sizes))) for p in parts)
    return DML_SPLIT_OPERATOR_DESC(InputTensor=tensor(dtype, sizes, strides), OutputCount=len(outputs), OutputTensors=outputs, Axis=axis)


@pytest.mark.parametrize("sizes, parts, axis", [((1, 1, 6, 2), (2, 1, 3), 2), ((2, 3, 4, 2, 5), (1, 1), 3), ((2, 3, 4, 5, 2), (1, 1), 4),
                                                 ((1, 1, 2, 8), (8,), 3)])
def test_outputs_are_the_input_cut_along_axis(sizes, parts, axis):
    x = np.arange(np.prod(sizes), dtype=np.float16).reshape(sizes)
    made = split(desc(sizes, parts, axis), {"InputTensor": x}, None, KernelState())
    expected = np.split(x, np.cumsum(parts)[:-1], axis=axis)
    assert len(made) == len(parts)
    for got, want in zip(made, expected):
        np.testing.assert_array_equal(got, want)
        assert got.flags.c_contiguous


def test_the_input_is_read_through_its_strides():
    x = np.arange(24, dtype=np.float32)  # a [1, 2, 3, 4] buffer read as [1, 3, 2, 4]
    made = split(desc((1, 3, 2, 4), (1, 3), 3, np.float32, strides=(24, 4, 12, 1)), {"InputTensor": x}, None, KernelState())
    np.testing.assert_array_equal(np.concatenate(made, axis=3), x.reshape(1, 2, 3, 4).transpose(0, 2, 1, 3))


def test_desc_rules():
    desc((1, 1, 6, 2), (2, 4), 2).validate(FL.FL_1_0)
    with pytest.raises(DescValidationError, match="add up to 5"):
        DML_SPLIT_OPERATOR_DESC(tensor(np.float16, (1, 1, 6, 2)), 2, (tensor(np.float16, (1, 1, 2, 2)), tensor(np.float16, (1, 1, 3, 2))), 2).validate()
    with pytest.raises(DescValidationError, match="Axis 4"):
        DML_SPLIT_OPERATOR_DESC(tensor(np.float16, (1, 1, 6, 2)), 1, (tensor(np.float16, (1, 1, 6, 2)),), 4).validate()
    with pytest.raises(DescValidationError, match="OutputCount"):
        DML_SPLIT_OPERATOR_DESC(tensor(np.float16, (1, 1, 6, 2)), 2, (tensor(np.float16, (1, 1, 6, 2)),), 2).validate()
    five = desc((2, 3, 4, 2, 5), (1, 1), 3)
    with pytest.raises(DescValidationError):
        five.validate(FL.FL_2_1)  # 4 dimensions before DML_FEATURE_LEVEL_3_0
    five.validate(FL.FL_3_0)
    with pytest.raises(DescValidationError):
        desc((1, 1, 2, 2), (1, 1), 3, np.int8).validate(FL.FL_1_0)  # 8-bit types from 2_1
    desc((1, 1, 2, 2), (1, 1), 3, np.int8).validate(FL.FL_2_1)
