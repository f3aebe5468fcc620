"""DML_OPERATOR_FILL_VALUE_CONSTANT (``dml_ep/operators/fill_value_constant.py``): DirectML's example, the desc's rules
per feature level, and ONNX ConstantOfShape on it, equal to onnxruntime's output in both arithmetics for every value type."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import numpy_helper

import dml_ep
from dml_ep.core.enums import DML_FEATURE_LEVEL as FL
from dml_ep.core.enums import DML_TENSOR_DATA_TYPE as DT
from dml_ep.core.errors import DescValidationError
from dml_ep.operators.fill_value_constant import DML_FILL_VALUE_CONSTANT_OPERATOR_DESC, fill_value_constant
from dml_ep.operators.importing import tensor
from dml_ep.operators.kernel_state import KernelState
from dml_ep.ort.reference import cpu_session
from onnx_builders import Feed, single_node_model


def desc_of(dtype, sizes, value, value_type=None):
    return DML_FILL_VALUE_CONSTANT_OPERATOR_DESC(tensor(dtype, sizes), int(value_type or DT.from_numpy(dtype)), value)


def test_directmls_example():
    desc = desc_of(np.float32, (1, 1, 2, 4), 13.0)
    desc.validate()
    got = fill_value_constant(desc, {}, None, KernelState())
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.full((1, 1, 2, 4), 13.0, np.float32))


def test_desc_rules():
    with pytest.raises(DescValidationError):
        desc_of(np.float16, (1, 1, 1, 2), 1.0, DT.FLOAT32).validate()  # ValueDataType must be the output's
    with pytest.raises(DescValidationError):
        desc_of(np.float32, (1, 1, 1, 2), 1.0).validate(FL.FL_2_0)  # from 2_1
    one_d = desc_of(np.float32, (2,), 1.0)
    with pytest.raises(DescValidationError):
        one_d.validate(FL.FL_3_1)  # 4 dimensions before 4_0
    one_d.validate(FL.FL_4_0)
    int64 = desc_of(np.int64, (1, 1, 1, 3), 1)
    with pytest.raises(DescValidationError):
        int64.validate(FL.FL_4_0)  # 64-bit from 4_1
    int64.validate(FL.FL_4_1)


VALUES = [np.array([1.5], np.float32), np.array([-0.0], np.float32), np.array([np.inf], np.float32), np.array([65504], np.float16),
          np.array([0.1], np.float16), np.array([np.pi], np.float64), np.array([-(2 ** 62) - 3], np.int64), np.array([2 ** 64 - 1], np.uint64),
          np.array([-7], np.int8), np.array([True]), np.array([False]), None]
SHAPES = [(2, 3), (1, 16), (2, 3, 4, 5, 6), (7,), ()]


def model_of(shape, value):
    """ConstantOfShape of a fed shape (an initializer would be folded by onnxruntime); the real EP reads it on the CPU,
    dml_ep plans the node from a run's values."""
    attributes = {} if value is None else {"value": numpy_helper.from_array(value)}
    dtype = np.float32 if value is None else value.dtype
    return single_node_model("ConstantOfShape", [Feed(np.array(shape, np.int64))], dtype, len(shape), opset=17, **attributes)


@pytest.mark.host_sensitive
@pytest.mark.parametrize("arithmetic", ["onnxruntime", "directml"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("value", VALUES, ids=lambda v: "default" if v is None else f"{v.dtype}:{v[0]}")
def test_constant_of_shape_is_planned_as_fill_value_constant_and_equals_onnxruntime(value, shape, arithmetic):
    model, feeds = model_of(shape, value)
    expected = cpu_session(model, threads=1).run(None, feeds)[0]
    session = dml_ep.InferenceSession(model.SerializeToString(), arithmetic=arithmetic)
    got = session.run(None, feeds)[0]
    assert [getattr(e, "operator", None) for e in session.plan.entries] == ["DML_OPERATOR_FILL_VALUE_CONSTANT"]
    assert got.dtype == expected.dtype and got.shape == expected.shape == shape
    np.testing.assert_array_equal(got, expected)
    assert got.tobytes() == expected.tobytes()  # -0.0 and the bits of every value


@pytest.mark.host_sensitive
@pytest.mark.parametrize("shape", [(0,), (2, 0, 3)])
def test_an_empty_output_falls_back_and_equals_onnxruntime(shape):
    model, feeds = model_of(shape, np.array([3], np.int32))
    expected = cpu_session(model, threads=1).run(None, feeds)[0]
    session = dml_ep.InferenceSession(model.SerializeToString(), arithmetic="onnxruntime")
    got = session.run(None, feeds)[0]
    assert [getattr(e, "reason", "").split(":")[0] for e in session.plan.entries] == [f"an empty ConstantOfShape {list(shape)}"]
    np.testing.assert_array_equal(got, expected)
    assert got.dtype == np.int32 and got.shape == expected.shape == shape
