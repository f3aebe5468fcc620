"""ONNX Sqrt on DML_OPERATOR_ELEMENT_WISE_SQRT (``dml_ep/operators/element_wise_sqrt.py``): planned
there, and bit-exact with onnxruntime's CPU Sqrt and with the correctly rounded square root (exact
in float64, then rounded once), float32 and float16."""

from __future__ import annotations

import numpy as np
import pytest

import dml_ep
from dml_ep.ort.reference import cpu_session
from onnx_builders import Feed, single_node_model

# Zeros of both signs, a denormal, powers of two, the largest finite values, infinity, a negative (NaN) and a spread.
SPECIAL = [0.0, -0.0, 1e-45, 0.25, 2.0, 3.0, 65504.0, np.inf, -1.0]


def inputs(dtype) -> np.ndarray:
    spread = np.random.default_rng(0).uniform(0, 1e4, 2000)
    return np.concatenate([SPECIAL, np.finfo(dtype).max * np.ones(1), spread]).astype(dtype).reshape(1, -1)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("opset", [6, 13])
def test_sqrt_is_the_correctly_rounded_square_root(dtype, opset):
    x = inputs(dtype)
    model, feeds = single_node_model("Sqrt", [Feed(x)], dtype, 2, opset=opset)
    session = dml_ep.InferenceSession(model.SerializeToString())
    assert [entry.operator for entry in session.plan.entries] == ["DML_OPERATOR_ELEMENT_WISE_SQRT"]
    with np.errstate(invalid="ignore"):
        exact = np.sqrt(x.astype(np.float64)).astype(dtype)
    np.testing.assert_array_equal(session.run(None, feeds)[0], exact)


@pytest.mark.host_sensitive
def test_sqrt_matches_onnxruntime():
    x = inputs(np.float32)
    model, feeds = single_node_model("Sqrt", [Feed(x)], np.float32, 2)
    expected = cpu_session(model, threads=1).run(None, feeds)[0]
    np.testing.assert_array_equal(dml_ep.InferenceSession(model.SerializeToString()).run(None, feeds)[0], expected)


def test_a_double_sqrt_runs_on_the_cpu_as_in_the_real_ep():
    """The DML EP registers Sqrt for float and float16 only: a double one is the CPU EP's."""
    model, _ = single_node_model("Sqrt", [Feed(np.ones((2, 3)))], np.float64, 2)
    [entry] = dml_ep.InferenceSession(model.SerializeToString()).plan.entries
    assert entry.kind == "types" and entry.reason.endswith("on the CPU in the real EP too")
