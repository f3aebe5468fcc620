"""gemm.py's "onnxruntime" arithmetic of a float16 MatMul: x86-64 onnxruntime has no float16 MatMul kernel, so
InsertCastTransformer runs float32 MLAS SGEMM between Casts (B packed where it is a constant initializer):
bit for bit at LLM projection shapes."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import dml_ep
from dml_ep.ort.reference import cpu_session


def fp16_matmul(m, k, n, constant, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((1, m, k)).astype(np.float16)
    b = (rng.standard_normal((k, n)) * 0.05).astype(np.float16)
    inputs = [helper.make_tensor_value_info("a", TensorProto.FLOAT16, [1, m, k])]
    if not constant:
        inputs.append(helper.make_tensor_value_info("b", TensorProto.FLOAT16, [k, n]))
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "mm", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)],
                              [numpy_helper.from_array(b, "b")] if constant else [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model.SerializeToString(), {"a": a} if constant else {"a": a, "b": b}


@pytest.mark.host_sensitive
@pytest.mark.parametrize("constant", [True, False])
@pytest.mark.parametrize("m, k, n", [(1, 256, 640), (1, 1024, 1024), (8, 640, 256), (8, 256, 1024), (8, 1024, 1024)])
def test_float16_matmul_is_onnxruntimes_float32_sgemm_bit_for_bit(m, k, n, constant):
    model, feeds = fp16_matmul(m, k, n, constant)
    expected = cpu_session(model).run(None, feeds)[0]
    got = dml_ep.InferenceSession(model, arithmetic="onnxruntime").run(None, feeds)[0]
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, expected)
