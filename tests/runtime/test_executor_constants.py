"""What depends on constants alone is worked out once per session, as the real EP uploads its
constant initializers once: a MatMulNBits' weight (DEQUANTIZE of its codes and scales) and what the
GEMM after it derives from that weight (converted, packed), however many layers share the GEMM's
signature."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import dml_ep
import dml_ep.operators.gemm
import dml_ep.runtime.executor
from dml_ep.core import nibbles

K = N = 64
LAYERS = 3


def layered_int4(float_type=np.float16) -> bytes:
    """LAYERS MatMulNBits of one shape in a chain, each its own random 4-bit weight (block 32,
    symmetric, as onnxruntime-genai's builder makes them): their GEMMs share one signature."""
    rng = np.random.default_rng(0)
    nodes, inits, x = [], [], "x"
    for layer in range(LAYERS):
        codes = rng.integers(0, 16, (N, K))
        inits += [numpy_helper.from_array(nibbles.pack(codes).reshape(N, K // 32, 16), f"b{layer}"),
                  numpy_helper.from_array((rng.random((N, K // 32)) * 0.05 + 0.01).astype(float_type), f"s{layer}")]
        nodes.append(helper.make_node("MatMulNBits", [x, f"b{layer}", f"s{layer}"], [f"y{layer}"], domain="com.microsoft",
                                      K=K, N=N, bits=4, block_size=32, accuracy_level=0))
        x = f"y{layer}"
    element = helper.np_dtype_to_tensor_dtype(np.dtype(float_type))
    graph = helper.make_graph(nodes, "layers", [helper.make_tensor_value_info("x", element, ["m", K])],
                              [helper.make_tensor_value_info(x, element, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)], ir_version=10)
    return model.SerializeToString()


@pytest.mark.parametrize("float_type", [np.float16, np.float32])
@pytest.mark.parametrize("arithmetic", ["onnxruntime", "directml"])
def test_a_constant_derived_weight_is_made_once_per_session(monkeypatch, arithmetic, float_type):
    model = layered_int4(float_type)
    feeds = [{"x": np.random.default_rng(seed).standard_normal((rows, K)).astype(float_type)} for seed, rows in enumerate((4, 1, 4, 1))]
    expected = [dml_ep.InferenceSession(model, arithmetic=arithmetic).run(None, f)[0] for f in feeds]  # each a session's first run
    made, kernels = [], []
    per_buffer, run_kernel = dml_ep.operators.gemm._per_buffer, dml_ep.runtime.executor.run_kernel

    def counted_per_buffer(tensors, state, key, make, desc):
        return per_buffer(tensors, state, key, lambda buffer: made.append(key) or make(buffer), desc)

    def counted_run_kernel(desc, *args, **kwargs):
        kernels.append(str(desc.OPERATOR_TYPE).replace("DML_OPERATOR_", ""))
        return run_kernel(desc, *args, **kwargs)

    monkeypatch.setattr(dml_ep.operators.gemm, "_per_buffer", counted_per_buffer)
    monkeypatch.setattr(dml_ep.runtime.executor, "run_kernel", counted_run_kernel)
    session = dml_ep.InferenceSession(model, arithmetic=arithmetic)
    assert [entry.operator.replace("DML_OPERATOR_", "") for entry in session.plan.dml_nodes] == ["DEQUANTIZE", "GEMM"] * LAYERS
    session.run(None, feeds[0])
    assert kernels.count("DEQUANTIZE") == LAYERS and kernels.count("GEMM") == LAYERS
    assert len(made) >= LAYERS  # each layer's weight converted for its GEMM (and packed, for a GEMM of several rows)
    first = len(made)
    for _ in range(2):  # the same and other shapes: no weight dequantized or converted again
        for f, want in zip(feeds, expected):
            np.testing.assert_array_equal(session.run(None, f)[0], want, strict=True)
    assert kernels.count("DEQUANTIZE") == LAYERS and kernels.count("GEMM") == LAYERS * (1 + 2 * len(feeds))
    assert made[first:] == []


def test_layers_of_one_signature_keep_their_own_kernel_state():
    session = dml_ep.InferenceSession(layered_int4(), arithmetic="onnxruntime")
    session.run(None, {"x": np.ones((2, K), np.float16)})
    executor = session.executor
    gemms = [entry for entry in session.plan.dml_nodes if entry.operator == "DML_OPERATOR_GEMM"]
    assert len({id(entry.imported) for entry in gemms}) == 1  # one signature
    states = [executor.kernel_state(entry) for entry in gemms]
    assert len({id(state) for state in states}) == LAYERS
    weights = [state.shared["BTensor"] for state in states]
    assert len({id(weight) for weight in weights}) == LAYERS and all(weights)  # each layer's weight, converted
    session.run(None, {"x": np.ones((1, K), np.float16)})  # another shape: other entries, reading the same weights
    others = [executor.kernel_state(entry) for entry in session.plan.dml_nodes if entry.operator == "DML_OPERATOR_GEMM"]
    assert not {id(state) for state in others} & {id(state) for state in states}
    assert [id(state.shared["BTensor"]) for state in others] == [id(weight) for weight in weights]


def dequantized_then_scaled() -> bytes:
    """DequantizeLinear of an int8 weight, a Mul by a constant, then a MatMul: the Mul reads only a
    value made from constants."""
    rng = np.random.default_rng(1)
    nodes = [helper.make_node("DequantizeLinear", ["w", "ws"], ["wf"]), helper.make_node("Mul", ["wf", "c"], ["wm"]),
             helper.make_node("MatMul", ["x", "wm"], ["y"])]
    inits = [numpy_helper.from_array(rng.integers(-100, 100, (K, 8)).astype(np.int8), "w"), numpy_helper.from_array(np.float32(0.02), "ws"),
             numpy_helper.from_array(rng.random((K, 8)).astype(np.float32), "c")]
    graph = helper.make_graph(nodes, "scaled", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["m", K])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10).SerializeToString()


@pytest.mark.parametrize("arithmetic", ["onnxruntime", "directml"])
def test_a_node_reading_values_made_from_constants_runs_once(monkeypatch, arithmetic):
    model = dequantized_then_scaled()
    x = np.random.default_rng(2).standard_normal((3, K)).astype(np.float32)
    expected = dml_ep.InferenceSession(model, arithmetic=arithmetic).run(None, {"x": x})[0]
    kernels: list[str] = []
    run_kernel = dml_ep.runtime.executor.run_kernel

    def counted_run_kernel(desc, *args, **kwargs):
        kernels.append(str(desc.OPERATOR_TYPE).replace("DML_OPERATOR_", ""))
        return run_kernel(desc, *args, **kwargs)

    monkeypatch.setattr(dml_ep.runtime.executor, "run_kernel", counted_run_kernel)
    session = dml_ep.InferenceSession(model, arithmetic=arithmetic)
    assert [entry.operator for entry in session.plan.dml_nodes] == ["DML_OPERATOR_DEQUANTIZE", "DML_OPERATOR_ELEMENT_WISE_MULTIPLY", "DML_OPERATOR_GEMM"]
    for _ in range(3):
        np.testing.assert_array_equal(session.run(None, {"x": x})[0], expected, strict=True)
    assert kernels == ["DEQUANTIZE", "ELEMENT_WISE_MULTIPLY", "GEMM", "GEMM", "GEMM"]
    multiply = session.plan.dml_nodes[1]
    other = {"wf": np.zeros((K, 8), np.float32)}  # as compare feeds a node onnxruntime's values: not the kept output
    assert not session.executor.run_dml(multiply, other).any() and kernels[-1] == "ELEMENT_WISE_MULTIPLY"
