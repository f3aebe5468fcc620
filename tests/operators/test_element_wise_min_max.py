from __future__ import annotations

import numpy as np
import pytest

import dml_ep
from dml_ep.ort.reference import cpu_session
from onnx_builders import Feed, single_node_model

A = np.array([[1.0, -2.0, np.nan, 3.0, np.inf, -np.inf, 0.5], [7.0, 0.0, 1.0, np.nan, -1.0, 2.0, -0.5]])
B = np.array([2.0, -3.0, 0.0, np.nan, 5.0, 1.0, -0.5])


def session(model, arithmetic="directml"):
    return dml_ep.InferenceSession(model.SerializeToString(), arithmetic=arithmetic)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("op, d3d", [("Min", np.fmin), ("Max", np.fmax)])
def test_directml_gives_the_other_operand_for_a_nan(op, d3d, dtype):
    a, b = A.astype(dtype), B.astype(dtype)
    model, feeds = single_node_model(op, [Feed(a), Feed(b)], dtype, 2)
    run = session(model)
    [entry] = run.plan.entries
    assert entry.operator == f"DML_OPERATOR_ELEMENT_WISE_{op.upper()}" and entry.desc.BTensor.Strides[-2] == 0
    y = run.run(None, feeds)[0]
    np.testing.assert_array_equal(y, d3d(a, b))
    assert not np.isnan(y[0, 2]) and not np.isnan(y[0, 3]) and np.isnan(y[1, 3])


@pytest.mark.host_sensitive
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64, np.int8])
@pytest.mark.parametrize("op", ["Min", "Max"])
def test_onnxruntime_arithmetic_propagates_nan_as_onnxruntime(op, dtype):
    a = A if np.dtype(dtype).kind == "f" else np.nan_to_num(A, nan=4, posinf=100, neginf=-100)
    b = B if np.dtype(dtype).kind == "f" else np.nan_to_num(B, nan=-4)
    model, feeds = single_node_model(op, [Feed(a.astype(dtype)), b.astype(dtype)], dtype, 2)
    y = session(model, "onnxruntime").run(None, feeds)[0]
    np.testing.assert_array_equal(y, cpu_session(model, threads=1).run(None, feeds)[0])


def test_three_inputs_fall_back_naming_the_real_ep_s_loop():
    model, _ = single_node_model("Max", [Feed(np.ones((2, 3), np.float32)) for _ in range(3)], np.float32, 2)
    [entry] = session(model).plan.entries
    assert "Max with 3 inputs" in entry.reason and "ELEMENT_WISE_MAX, once per input" in entry.reason


@pytest.mark.parametrize("dtype", [np.float16, np.int64])
@pytest.mark.parametrize("op", ["Min", "Max"])
def test_one_input_is_an_identity_as_in_the_real_ep(op, dtype):
    x = A.astype(dtype) if dtype == np.float16 else np.arange(A.size, dtype=dtype).reshape(A.shape) - 3
    model, feeds = single_node_model(op, [Feed(x)], dtype, 2)
    run = session(model)
    [entry] = run.plan.entries
    assert entry.operator == "DML_OPERATOR_ELEMENT_WISE_IDENTITY"
    np.testing.assert_array_equal(run.run(None, feeds)[0].view(np.uint8), x.view(np.uint8))


def test_integers_are_exact_in_every_arithmetic_and_floats_not_for_nan():
    from dml_ep.operators.registration import OPERATORS

    model, _ = single_node_model("Min", [Feed(np.ones((2, 3), np.int32)), Feed(np.ones(3, np.int32))], np.int32, 2)
    [entry] = session(model).plan.entries
    assert OPERATORS[type(entry.desc).OPERATOR_TYPE].exact_for_any_input(entry.desc)
    model, _ = single_node_model("Min", [Feed(np.ones((2, 3), np.float16)), Feed(np.ones(3, np.float16))], np.float16, 2)
    [entry] = session(model).plan.entries
    assert not OPERATORS[type(entry.desc).OPERATOR_TYPE].exact_for_any_input(entry.desc)
