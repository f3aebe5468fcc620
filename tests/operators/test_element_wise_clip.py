from __future__ import annotations

import numpy as np
import pytest

import dml_ep
from dml_ep.ort.reference import cpu_session
from onnx_builders import Feed, single_node_model

X = np.array([[-5.0, -1.0, -0.5, 0.0, 0.25, 1.0, 3.0, np.inf, -np.inf, np.nan]])


def session(model, arithmetic="directml"):
    return dml_ep.InferenceSession(model.SerializeToString(), arithmetic=arithmetic)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_clip_11_to_13_is_clip1_of_the_constant_bounds(dtype):
    x = X.astype(dtype)
    model, feeds = single_node_model("Clip", [Feed(x), np.array(-0.5, dtype), np.array(1.0, dtype)], dtype, 2)
    run = session(model)
    [entry] = run.plan.entries
    assert entry.operator == "DML_OPERATOR_ELEMENT_WISE_CLIP1"
    assert (entry.desc.Min, entry.desc.Max, entry.desc.MinMaxDataType) == (-0.5, 1.0, 1 if dtype == np.float32 else 2)
    y = run.run(None, feeds)[0]
    np.testing.assert_array_equal(y[0, :9], [-0.5, -0.5, -0.5, 0.0, 0.25, 1.0, 1.0, 1.0, -0.5])
    assert y[0, 9] == 1.0, "D3D's min(NaN, Max) is Max"


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_an_absent_bound_is_the_type_s_extreme(dtype):
    model, _ = single_node_model("Clip", [Feed(X.astype(dtype)), None, np.array(1.0, dtype)], dtype, 2)
    [entry] = session(model).plan.entries
    assert entry.desc.Min == float(np.finfo(dtype).min) and entry.desc.Max == 1.0


@pytest.mark.host_sensitive
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("bounds", [(-0.5, 1.0), (None, 0.0), (2.0, -1.0)])
def test_onnxruntime_arithmetic_matches_onnxruntime(bounds, dtype):
    """NaN stays NaN; with min above max onnxruntime gives max."""
    low, high = (None if b is None else np.array(b, dtype) for b in bounds)
    model, feeds = single_node_model("Clip", [Feed(X.astype(dtype)), low, high], dtype, 2)
    y = session(model, "onnxruntime").run(None, feeds)[0]
    np.testing.assert_array_equal(y, cpu_session(model, threads=1).run(None, feeds)[0])


def test_min_above_max_gives_min_in_directml_and_max_in_onnxruntime():
    model, feeds = single_node_model("Clip", [Feed(X.astype(np.float32)), np.array(2.0, np.float32), np.array(-1.0, np.float32)], np.float32, 2)
    assert (session(model).run(None, feeds)[0] == 2.0).all()
    assert (session(model, "onnxruntime").run(None, feeds)[0][0, :9] == -1.0).all()


def test_clip_6_is_the_clip_activation_of_its_attributes():
    x = X.astype(np.float32)
    model, feeds = single_node_model("Clip", [Feed(x)], np.float32, 2, opset=6, min=-1.0, max=2.0)
    run = session(model)
    [entry] = run.plan.entries
    assert entry.operator == "DML_OPERATOR_ELEMENT_WISE_CLIP" and (entry.desc.Min, entry.desc.Max) == (-1.0, 2.0)
    np.testing.assert_array_equal(run.run(None, feeds)[0], np.clip(x, -1.0, 2.0))


def test_an_integer_clip_falls_back_and_a_computed_bound_waits_for_its_value():
    model, _ = single_node_model("Clip", [Feed(np.ones((2, 3), np.int32)), np.array(0, np.int32), np.array(1, np.int32)], np.int32, 2)
    [entry] = session(model).plan.entries
    assert "ELEMENT_WISE_CLIP1" in entry.reason and "not modelled" in entry.reason
    model, _ = single_node_model("Clip", [Feed(X.astype(np.float32)), Feed(np.array(0.0, np.float32))], np.float32, 2)
    [entry] = session(model).plan.entries
    assert "computed at run time" in entry.reason
