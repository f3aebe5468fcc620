"""compare names a float16 chain the CPU EP runs in float32 (InsertCastTransformer) "graph", not a cause of
the last node's own arithmetic: Sigmoid -> Mul -> MatMul, the SiLU MLP's shape, against onnxruntime."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from dml_ep.conformance.compare import compare_model
from dml_ep.conformance.float32_chains import FLOAT32_CHAIN, float32_chain, reads_float32

pytestmark = pytest.mark.host_sensitive  # x86-64 onnxruntime's float16 kernels decide the chain

K, N = 256, 64


def silu_matmul(dtype) -> onnx.ModelProto:
    """x -> Sigmoid -> Mul(x) -> MatMul(W): the Mul output is read unrounded by the CPU EP's float32 MatMul."""
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    weight = np.random.default_rng(1).standard_normal((K, N)).astype(dtype)
    graph = helper.make_graph(
        [helper.make_node("Sigmoid", ["x"], ["s"], name="sigmoid"),
         helper.make_node("Mul", ["x", "s"], ["m"], name="mul"),
         helper.make_node("MatMul", ["m", "w"], ["y"], name="down_proj")],
        "silu", [helper.make_tensor_value_info("x", elem, [4, K])], [helper.make_tensor_value_info("y", elem, [4, N])],
        [onnx.numpy_helper.from_array(weight, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def feeds(dtype):
    return {"x": np.random.default_rng(0).standard_normal((4, K)).astype(dtype)}


def matmul_of(report):
    return next(n for n in report.nodes if n.node == "down_proj")


def test_float16_chain_in_float32_is_graph():
    report = compare_model(silu_matmul(np.float16), feeds(np.float16), arithmetic="onnxruntime", per_node=True)
    node = matmul_of(report)
    assert node.differs_in_isolation  # onnxruntime's MatMul read the float32 product, dml_ep the float16-rounded one
    assert set(node.causes) == {"graph"}
    assert FLOAT32_CHAIN in node.graph


def test_shown_value_read_unrounded_is_graph():
    """s and m also graph outputs: the reference shows their float16 rounding (a Cast for the output) while Mul and
    MatMul read them in float32; in isolation on the shown values, what no arithmetic reproduces is "graph"."""
    model = silu_matmul(np.float16)
    model.graph.output.extend(helper.make_tensor_value_info(name, TensorProto.FLOAT16, [4, K]) for name in ("s", "m"))
    report = compare_model(model, feeds(np.float16), arithmetic="directml", per_node=True)
    causes = {n.op_type: n.causes for n in report.nodes if n.causes}
    assert set(causes) == {"Mul", "MatMul"} and all(set(c) == {"graph"} for c in causes.values())
    assert all(FLOAT32_CHAIN in n.graph for n in report.nodes if n.causes)


def test_float32_model_not_relabelled():
    """In float32 the CPU EP has its kernels (and fuses x * Sigmoid(x) into QuickGelu, hiding the Sigmoid's output):
    the "directml" arithmetic's differences keep their own causes, the hidden Sigmoid -> Mul chain's too."""
    report = compare_model(silu_matmul(np.float32), feeds(np.float32), arithmetic="directml", per_node=True)
    causes = {n.op_type: set(n.causes) for n in report.nodes if n.causes}
    assert causes == {"Mul": {"float32 rounding"}, "MatMul": {"float summation order"}}
    assert all(n.graph is None for n in report.nodes)


def test_float32_chain_needs_a_hidden_value_between_kernelless_nodes():
    class Entry:
        def __init__(self, op, inputs, output):
            self.node = helper.make_node(op, inputs, [output])
            self.value_inputs, self.outputs = inputs, [output]

    half = np.zeros(2, np.float16)
    chain = [Entry("Sigmoid", ["x"], "s"), Entry("Mul", ["x", "s"], "m")]
    values = {"x": half, "s": half, "m": half}
    assert float32_chain(chain, {"x": half}, values)  # s hidden: the Cast between Sigmoid and Mul was removed
    assert not float32_chain(chain, {"x": half, "s": half}, values)  # s shown: the reference rounded it
    assert not float32_chain(chain, {"x": half}, {k: v.astype(np.float32) for k, v in values.items()})  # float32: no Casts
    skip = [Entry("SkipLayerNormalization", ["x"], "s"), Entry("Mul", ["x", "s"], "m")]
    skip[0].node.domain = "com.microsoft"
    assert not float32_chain(skip, {"x": half}, values)  # a float16 kernel: its output is rounded
    shown = {"x": half, "s": half, "m": half}
    assert reads_float32(chain[1], {"s": (0, chain[0])}, shown)  # Mul read Sigmoid's float32 s, not the rounded one shown
    assert not reads_float32(chain[1], {"s": (0, skip[0])}, shown)  # SkipLayerNormalization's s is float16
    assert not reads_float32(chain[1], {}, shown)  # graph inputs only
