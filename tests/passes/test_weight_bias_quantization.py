"""WeightBiasQuantization (``dml_ep.passes.weight_bias_quantization``, onnxruntime 1.20+'s
weight_bias_quantization.cc): a float Conv bias becomes an int32 DQ so that the Conv rule fuses the
node, and a float32 weight initializer becomes int8 codes and a DQ with onnxruntime's own codes,
scale and zero point (read from the optimized graph it writes).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

import dml_ep
from dml_ep.ort.reference import cpu_session
from onnx_builders import F32, I32, U8, W_SCALES, X_SCALE, Graph, conv_model, node, ops, rewrite, unfused


def test_float_bias_quantized_then_conv_fuses():
    """WeightBiasQuantization (1.20+): a float Conv bias becomes DQ(int32 rint(bias / (x_s * w_s)),
    x_s * w_s) in float32 when X comes from a DQ and the output reaches a Q; the Conv rule then fuses
    it with that int32 bias."""
    graph = rewrite(conv_model(bias="float"))
    assert ops(graph) == [("QLinearConv", "")]
    qconv = graph.nodes[0]
    bias = graph.constants[qconv.input[8]]
    expected = np.rint(np.array([0.0123, -0.5, 1.37], F32) / (np.float32(X_SCALE) * W_SCALES)).astype(I32)
    assert bias.dtype == I32
    np.testing.assert_array_equal(bias, expected)
    assert graph.origin(qconv).rules == ("WeightBiasQuantization", "Conv")


def test_float_bias_not_quantized_before_1_20():
    """1.17-1.19 have no WeightBiasQuantization: the float bias is not from a DQ, so CheckQDQNodes
    (every existing input from a DQ) rejects the Conv."""
    graph = rewrite(conv_model(bias="float"), "1.17-1.19")
    assert unfused(graph, "Conv")
    assert "2 of its inputs come from DequantizeLinear, 3 must" in graph.origin(node(graph, "Conv")).note


def test_float_bias_not_quantized_without_a_q():
    """WeightBiasQuantization needs a no-branch path from the node to a QuantizeLinear; a Conv
    whose output also feeds another node keeps its float bias (and stays unfused)."""
    graph = rewrite(conv_model(bias="float", other_consumer=True))
    assert unfused(graph, "Conv")
    assert "bias" in node(graph, "Conv").input[2] and not graph.added_constants


# --- A float weight -------------------------------------------------------------------------------


def _float_weight_model(op_type):
    """DQ(x) -> <op_type> with a float32 weight initializer (and bias) -> Q: a QOperator model's
    ConvTranspose or Conv that the quantizer left float, as PP-OCRv4's detector has them."""
    rng = np.random.default_rng(21)
    g = Graph()
    x = g.node("DequantizeLinear", [g.input("xq", U8, [1, 3, 6, 6]), g.const("xs", F32(0.02)), g.const("xz", U8(120))], "x")
    weight = (rng.standard_normal((3, 4, 3, 3)) * 0.3).astype(F32)
    weight[0, 0, 0, 0] = -0.79  # an asymmetric range: the zero point is not 0
    y = g.node(op_type, [x, g.const("w", weight), g.const("b", rng.standard_normal(4).astype(F32))], "y")
    g.node("QuantizeLinear", [y, g.const("ys", F32(0.05)), g.const("yz", U8(128))], "q")
    g.output("q", U8, None)
    return g.model()


@pytest.mark.host_sensitive
@pytest.mark.parametrize("op_type", ["ConvTranspose", "Conv"])
def test_float_weight_quantized_as_onnxruntime_quantizes_it(op_type, tmp_path):
    """WeightBiasQuantization (weight_bias_quantization.cc) also quantizes a float32 weight
    initializer: GetQuantizationParameter<int8_t> (per tensor, asymmetric) and a Q that constant
    folding folds. dml_ep's codes, scale and zero point are onnxruntime's own, read from the
    optimized graph it writes; then the Conv rule fuses the Conv, and both run bit-exactly."""
    model = _float_weight_model(op_type)
    if op_type == "Conv":  # Conv wants [out, in, kh, kw]: 4 filters over 3 channels
        model.graph.initializer[2].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(model.graph.initializer[2]).transpose(1, 0, 2, 3).copy(), "w"))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    optimized = onnx.load(str(tmp_path / "optimized.onnx"))
    theirs = {i.name: numpy_helper.to_array(i) for i in optimized.graph.initializer}
    graph = rewrite(model)
    ours = {name: graph.constants[name] for name in graph.added_constants}
    for suffix in ("_weight_q", "_weight_scale", "_weight_zp"):
        name = f"y{suffix}"
        assert name in theirs and name in ours, name
        np.testing.assert_array_equal(ours[name], theirs[name], strict=True)
    assert int(ours["y_weight_zp"]) != 0
    if op_type == "Conv":
        assert ops(graph) == [("QLinearConv", "")]
    feeds = {"xq": np.random.default_rng(3).integers(0, 256, (1, 3, 6, 6)).astype(U8)}
    np.testing.assert_array_equal(dml_ep.InferenceSession(model, arithmetic="onnxruntime").run(None, feeds)[0],
                                  cpu_session(model, "ort").run(None, feeds)[0])
