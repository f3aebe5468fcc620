"""ONNX Erf on DML_OPERATOR_ELEMENT_WISE_ERF: planned as the real EP builds it; erf rounded once in
the "directml" arithmetic (against ``math.erf``, and within WebNN's tolerance of it), onnxruntime's
CPU Erf bit for bit in the "onnxruntime" one."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dml_ep
from dml_ep.core.enums import DML_FEATURE_LEVEL as FL
from dml_ep.core.enums import DML_TENSOR_DATA_TYPE as DT
from dml_ep.core.errors import DescValidationError
from dml_ep.core.tensor_desc import DML_BUFFER_TENSOR_DESC
from dml_ep.numerics.arithmetic import Arithmetic
from dml_ep.operators.element_wise_erf import DEVICE_PRECISION, DML_ELEMENT_WISE_ERF_OPERATOR_DESC, element_wise_erf
from dml_ep.operators.kernel_state import KernelState
from dml_ep.ort.reference import cpu_session
from onnx_builders import Feed, single_node_model

# Zeros of both signs, a denormal, both sides of MLAS's split (0.921875) and clamp (3.925), large, infinite, NaN, a
# spread; 0.001482, whose erf rounded through float32 lands one float16 ulp off (rounded once it does not).
SPECIAL = [0.0, -0.0, 1e-45, 0.921875, 0.9, 3.9, 3.95, -2.5, 10.0, np.inf, -np.inf, np.nan, 0.001482]


def inputs(dtype) -> np.ndarray:
    spread = np.random.default_rng(0).uniform(-5, 5, 1999)
    return np.concatenate([SPECIAL, spread]).astype(dtype).reshape(2, -1)


def exact(x: np.ndarray) -> np.ndarray:
    """erf in float64 with ``math.erf``, rounded once to ``x``'s type."""
    return np.array([math.erf(v) for v in x.astype(np.float64).reshape(-1)]).reshape(x.shape).astype(x.dtype)


def session(x, opset=13, arithmetic="directml"):
    model, feeds = single_node_model("Erf", [Feed(x)], x.dtype, 2, opset=opset)
    return dml_ep.InferenceSession(model.SerializeToString(), arithmetic=arithmetic), model, feeds


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("opset", [9, 13])
def test_erf_is_erf_rounded_once(dtype, opset):
    x = inputs(dtype)
    ours, _, feeds = session(x, opset)
    assert [entry.operator for entry in ours.plan.entries] == ["DML_OPERATOR_ELEMENT_WISE_ERF"]
    np.testing.assert_array_equal(ours.run(None, feeds)[0], exact(x))


@pytest.mark.parametrize("dtype, atol", [(np.float32, 1 / 1024), (np.float16, 1 / 512)])
def test_onnxruntime_arithmetic_is_within_webnns_tolerance_of_erf(dtype, atol):
    """MLAS's approximation sits far inside the envelope a DirectML device may use."""
    assert (DEVICE_PRECISION.atol32, DEVICE_PRECISION.atol16) == (1 / 1024, 1 / 512) and "WebNN" in DEVICE_PRECISION.rule
    x = inputs(dtype)
    ours, _, feeds = session(x, arithmetic="onnxruntime")
    y = ours.run(None, feeds)[0].astype(np.float64)
    expected = exact(x).astype(np.float64)
    finite = ~np.isnan(x)
    assert np.abs(y - expected)[finite].max() <= min(atol, 2 * float(np.finfo(dtype).eps))
    assert np.isnan(y[~finite]).all()


@pytest.mark.host_sensitive
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_onnxruntime_arithmetic_is_onnxruntimes_erf_bit_for_bit(dtype):
    x = inputs(dtype)
    ours, model, feeds = session(x, arithmetic="onnxruntime")
    reference = cpu_session(model, threads=1).run(None, feeds)[0]
    actual = ours.run(None, feeds)[0]
    assert np.array_equal(actual, reference, equal_nan=True)
    assert np.array_equal(np.signbit(actual), np.signbit(reference))


def test_scale_bias_is_applied_before_erf():
    t = DML_BUFFER_TENSOR_DESC.create(DT.FLOAT32, (1, 1, 1, 3))
    desc = DML_ELEMENT_WISE_ERF_OPERATOR_DESC(InputTensor=t, OutputTensor=t, ScaleBias=(2.0, -0.5))
    desc.validate()
    x = np.float32([0.25, 0.5, 1.0])
    y = element_wise_erf(desc, {"InputTensor": x}, Arithmetic("directml"), KernelState())
    np.testing.assert_array_equal(y.reshape(-1), np.float32([0.0, math.erf(0.5), math.erf(1.5)]))


def test_a_large_float16_tensor_reads_the_table_of_its_scale_and_bias():
    """Float16 erf from a table of all 65536 values, one per ScaleBias: the same as computing each."""
    x = np.linspace(-3, 3, 2048).astype(np.float16)
    t = DML_BUFFER_TENSOR_DESC.create(DT.FLOAT16, (1, 1, 1, x.size))
    for scale_bias in (None, (0.5, 0.25)):
        desc = DML_ELEMENT_WISE_ERF_OPERATOR_DESC(InputTensor=t, OutputTensor=t, ScaleBias=scale_bias)
        scaled = x.astype(np.float32) if scale_bias is None else x.astype(np.float32) * np.float32(0.5) + np.float32(0.25)
        y = element_wise_erf(desc, {"InputTensor": x}, Arithmetic("directml"), KernelState())
        np.testing.assert_array_equal(y.reshape(-1), exact(scaled).astype(np.float16))
    # float16 erf is the same in both arithmetics: MLAS's error stays below half a float16 ulp on every value
    ours = element_wise_erf(desc, {"InputTensor": x}, Arithmetic("onnxruntime"), KernelState())
    np.testing.assert_array_equal(ours, y)


def test_desc_follows_directmls_support_table():
    t4, t3 = (DML_BUFFER_TENSOR_DESC.create(DT.FLOAT16, sizes) for sizes in ((1, 2, 3, 4), (2, 3, 4)))
    DML_ELEMENT_WISE_ERF_OPERATOR_DESC(InputTensor=t4, OutputTensor=t4).validate(FL.FL_2_0)
    with pytest.raises(DescValidationError, match="requires DML_FEATURE_LEVEL_2_0"):
        DML_ELEMENT_WISE_ERF_OPERATOR_DESC(InputTensor=t4, OutputTensor=t4).validate(FL.FL_1_0)
    with pytest.raises(DescValidationError, match="DimensionCount 3"):
        DML_ELEMENT_WISE_ERF_OPERATOR_DESC(InputTensor=t3, OutputTensor=t3).validate(FL.FL_2_0)
    DML_ELEMENT_WISE_ERF_OPERATOR_DESC(InputTensor=t3, OutputTensor=t3).validate(FL.FL_3_0)
    with pytest.raises(DescValidationError, match="must equal OutputTensor's"):
        DML_ELEMENT_WISE_ERF_OPERATOR_DESC(InputTensor=t4, OutputTensor=DML_BUFFER_TENSOR_DESC.create(DT.FLOAT16, (1, 2, 3, 5))).validate()
    int32 = DML_BUFFER_TENSOR_DESC.create(DT.INT32, (1, 2, 3, 4))
    with pytest.raises(DescValidationError, match="DataType INT32"):
        DML_ELEMENT_WISE_ERF_OPERATOR_DESC(InputTensor=int32, OutputTensor=int32).validate()
