from __future__ import annotations

import numpy as np
import pytest

import dml_ep
from dml_ep.ort.reference import cpu_session
from onnx_builders import Feed, single_node_model


def bases(dtype) -> np.ndarray:
    spread = np.random.default_rng(0).uniform(-12, 12, 3000)
    return np.concatenate([[0.0, -0.0, 1.0, -1.0, 0.5, -2.0, np.inf, -np.inf, np.nan, 1e-30], spread]).astype(dtype).reshape(1, -1)


def session(model, arithmetic="directml"):
    return dml_ep.InferenceSession(model.SerializeToString(), arithmetic=arithmetic)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("exponent", [2.0, 3.0, 0.5, -1.5])
def test_a_constant_exponent_is_constant_pow_rounded_once(exponent, dtype):
    x = bases(dtype)
    model, feeds = single_node_model("Pow", [Feed(x), np.array(exponent, dtype)], dtype, 2)
    run = session(model)
    [entry] = run.plan.entries
    assert entry.operator == "DML_OPERATOR_ELEMENT_WISE_CONSTANT_POW" and entry.desc.Exponent == exponent
    with np.errstate(all="ignore"):
        exact = np.power(x.astype(np.float64), np.full(x.shape, exponent)).astype(dtype)
    if exponent != int(exponent):  # "Negative bases are supported for integral exponents, otherwise this operator returns NaN."
        exact[x < 0] = np.nan
    np.testing.assert_array_equal(run.run(None, feeds)[0], exact)


def test_an_integer_constant_exponent_is_read_as_a_float():
    model, _ = single_node_model("Pow", [Feed(np.ones((2, 3), np.float32)), np.array([2], np.int32)], np.float32, 2)
    [entry] = session(model).plan.entries
    assert entry.operator == "DML_OPERATOR_ELEMENT_WISE_CONSTANT_POW" and entry.desc.Exponent == 2.0


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_an_exponent_tensor_is_pow_broadcast(dtype):
    x = np.abs(bases(dtype)[:, :12]).reshape(3, 4)
    e = np.array([0.5, 2.3001, -1.0, 3.0], dtype)
    model, feeds = single_node_model("Pow", [Feed(x), Feed(e)], dtype, 2)
    run = session(model)
    [entry] = run.plan.entries
    assert entry.operator == "DML_OPERATOR_ELEMENT_WISE_POW" and entry.desc.ExponentTensor.Strides[-2] == 0
    np.testing.assert_array_equal(run.run(None, feeds)[0], np.power(x.astype(np.float64), e.astype(np.float64)).astype(dtype))


@pytest.mark.host_sensitive
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("exponent", [2.0, 3.0])
def test_onnxruntime_squares_and_cubes_bit_for_bit(exponent, dtype):
    """x * x, and (x * x) * x in two roundings: the cube is not the rounded one."""
    x = bases(dtype)
    model, feeds = single_node_model("Pow", [Feed(x), np.array(exponent, dtype)], dtype, 2)
    y = session(model, "onnxruntime").run(None, feeds)[0]
    np.testing.assert_array_equal(y, cpu_session(model, threads=1).run(None, feeds)[0])
    if exponent == 3.0 and dtype == np.float32:
        assert (y != session(model).run(None, feeds)[0]).any()


@pytest.mark.host_sensitive
@pytest.mark.parametrize("exponent", [2.0, 0.5])
def test_every_float16_value_matches_onnxruntime(exponent):
    """Through onnxruntime's Casts: the last size % 8 NaNs canonical."""
    x = np.arange(65536, dtype=np.uint16).view(np.float16)[:65531].reshape(1, -1)
    model, feeds = single_node_model("Pow", [Feed(x), np.array(exponent, np.float16)], np.float16, 2)
    y = session(model, "onnxruntime").run(None, feeds)[0]
    np.testing.assert_array_equal(y.view(np.uint16), cpu_session(model, threads=1).run(None, feeds)[0].view(np.uint16))


@pytest.mark.host_sensitive
def test_a_cube_of_a_one_element_exponent_tensor_is_onnxruntime_s_too():
    x = bases(np.float32)
    model, feeds = single_node_model("Pow", [Feed(x), Feed(np.array([3.0], np.float32))], np.float32, 2)
    np.testing.assert_array_equal(session(model, "onnxruntime").run(None, feeds)[0], cpu_session(model, threads=1).run(None, feeds)[0])


@pytest.mark.host_sensitive
def test_other_exponents_differ_from_onnxruntime_by_at_most_a_ulp_in_few_values():
    """The residual: Eigen's pow is not always the correctly rounded power that dml_ep gives."""
    x = np.abs(bases(np.float32))[:, 10:]
    model, feeds = single_node_model("Pow", [Feed(x), np.array(2.5, np.float32)], np.float32, 2)
    y = session(model, "onnxruntime").run(None, feeds)[0]
    expected = cpu_session(model, threads=1).run(None, feeds)[0]
    ulps = np.abs(y.view(np.int32).astype(np.int64) - expected.view(np.int32))
    assert ulps.max() <= 1 and np.count_nonzero(ulps) <= x.size // 100


@pytest.mark.host_sensitive
@pytest.mark.parametrize("exponent", [[3], [2, 3, -1]])
def test_an_integer_exponent_tensor_is_pow_from_feature_level_3_0(exponent):
    """onnxruntime's Pow<float, int32> cubes in two roundings too; before 3_0 POW's exponent had the input's type."""
    x = np.abs(bases(np.float32))[:, 10:16].reshape(2, 3)
    model, feeds = single_node_model("Pow", [Feed(x), Feed(np.array(exponent, np.int32))], np.float32, 2)
    [entry] = session(model).plan.entries
    assert entry.desc.ExponentTensor.DataType.name == "INT32" and entry.operator == "DML_OPERATOR_ELEMENT_WISE_POW"
    entry.desc.validate("3_0")
    with pytest.raises(dml_ep.core.errors.DescValidationError, match="INT32 is not supported at DML_FEATURE_LEVEL_2_1"):
        entry.desc.validate("2_1")
    np.testing.assert_array_equal(session(model, "onnxruntime").run(None, feeds)[0], cpu_session(model, threads=1).run(None, feeds)[0])


def test_a_float16_exponent_of_a_float32_input_needs_feature_level_3_0():
    model, _ = single_node_model("Pow", [Feed(np.ones((2, 3), np.float32)), Feed(np.ones(3, np.float16))], np.float32, 2)
    [entry] = session(model).plan.entries
    entry.desc.validate("3_0")
    with pytest.raises(dml_ep.core.errors.DescValidationError, match="must equal InputTensor's"):
        entry.desc.validate("2_1")


def test_an_int64_exponent_tensor_falls_back():
    model, _ = single_node_model("Pow", [Feed(np.ones((2, 3), np.float32)), Feed(np.ones(3, np.int64))], np.float32, 2)
    [entry] = session(model).plan.entries
    assert entry.kind == "types" and "int64" in entry.reason
