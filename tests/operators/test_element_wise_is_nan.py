from __future__ import annotations

import numpy as np
import pytest

import dml_ep
from dml_ep.ort.reference import cpu_session
from onnx_builders import Feed, single_node_model


@pytest.mark.host_sensitive
@pytest.mark.parametrize("arithmetic", ["directml", "onnxruntime"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("opset", [9, 13, 20])
def test_is_nan_is_one_for_every_nan_bit_pattern(opset, dtype, arithmetic):
    """Every float16 bit pattern (quiet and signalling NaNs of both signs, infinities); float32's through them."""
    x = np.arange(65536, dtype=np.uint16).view(np.float16).astype(dtype).reshape(2, -1)
    model, feeds = single_node_model("IsNaN", [Feed(x)], np.bool_, 2, opset=opset)
    session = dml_ep.InferenceSession(model.SerializeToString(), arithmetic=arithmetic)
    [entry] = session.plan.entries
    assert entry.operator == "DML_OPERATOR_ELEMENT_WISE_IS_NAN" and entry.desc.OutputTensor.DataType.name == "UINT8"
    y = session.run(None, feeds)[0]
    assert y.dtype == np.bool_ and y.sum() == 2 * 1023
    np.testing.assert_array_equal(y, cpu_session(model, threads=1).run(None, feeds)[0])


def test_a_double_is_nan_runs_on_the_cpu_as_in_the_real_ep():
    model, _ = single_node_model("IsNaN", [Feed(np.ones((2, 3)))], np.bool_, 2)
    [entry] = dml_ep.InferenceSession(model.SerializeToString()).plan.entries
    assert entry.kind == "types" and entry.reason.endswith("on the CPU in the real EP too")
