"""com.microsoft SkipLayerNormalization and SkipSimplifiedLayerNormalization as the DML EP runs them
(DmlOperatorSkipLayerNormalization.cpp): ELEMENT_WISE_ADD (input, skip) [-> ADD bias] ->
MEAN_VARIANCE_NORMALIZATION2, planned as those parts standing for the user's node; float32 bit-exact
with onnxruntime's CPU kernel in the "onnxruntime" arithmetic where the real EP computes the same,
and SkipSimplifiedLayerNormalization's bias added after normalizing, as the real EP does."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper

import dml_ep
from dml_ep.ort.reference import cpu_session

ADD, MVN2 = "DML_OPERATOR_ELEMENT_WISE_ADD1", "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION2"


def skip_model(op, dtype, hidden=512, beta=True, bias=True, sum_output=True, epsilon=1e-6, seed=0):
    """One Skip(Simplified)LayerNormalization on an LLM's [1, S, hidden], input and skip fed, the rest initializers."""
    rng = np.random.default_rng(seed)
    x, skip = ((rng.standard_normal((1, 6, hidden)) * 2 + 0.3).astype(dtype) for _ in range(2))
    gamma, beta_, bias_ = (rng.standard_normal(hidden).astype(dtype) for _ in range(3))
    simplified = op == "SkipSimplifiedLayerNormalization"
    parameters = [("gamma", gamma)] + ([] if simplified or not beta else [("beta", beta_)]) + ([("bias", bias_)] if bias else [])
    if not simplified and bias and not beta:
        parameters.insert(1, ("", None))
    outputs = ["y"] + (["", "", "sum"] if sum_output else [])
    node = helper.make_node(op, ["x", "skip"] + [name for name, _ in parameters], outputs, domain="com.microsoft", epsilon=epsilon)
    tensor = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info(n, tensor, (1, 6, hidden)) for n in ("x", "skip")],
                              [helper.make_tensor_value_info(n, tensor, None) for n in outputs if n],
                              [numpy_helper.from_array(value, name) for name, value in parameters if name])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    return model, {"x": x, "skip": skip}, dict(parameters)


def exact(x, skip, gamma, beta, pre_bias, post_bias, epsilon, simplified):
    total = x.astype(np.float64) + skip.astype(np.float64)
    if pre_bias is not None:
        total = total + pre_bias.astype(np.float64)
    centred = total if simplified else total - total.mean(-1, keepdims=True)
    y = centred / np.sqrt((centred * centred).mean(-1, keepdims=True) + float(np.float32(epsilon))) * gamma.astype(np.float64)
    for added in (beta, post_bias):
        y = y if added is None else y + added.astype(np.float64)
    return y


@pytest.mark.parametrize("op", ["SkipLayerNormalization", "SkipSimplifiedLayerNormalization"])
def test_planned_as_the_real_eps_graph(op):
    model, _, _ = skip_model(op, np.float16)
    entries = dml_ep.InferenceSession(model.SerializeToString()).plan.entries
    expected = [ADD, MVN2] if op == "SkipSimplifiedLayerNormalization" else [ADD, ADD, MVN2]
    assert [entry.operator for entry in entries] == expected


@pytest.mark.host_sensitive
@pytest.mark.parametrize("bias", [False, True])
def test_float32_skip_simplified_is_bit_exact_with_onnxruntime_without_bias(bias):
    """The RMS norm's float32 loop, bit for bit, where the real EP and onnxruntime add the same;
    with a bias (input 3) they differ by where it is added."""
    model, feeds, parameters = skip_model("SkipSimplifiedLayerNormalization", np.float32, bias=bias)
    expected = cpu_session(model, threads=1).run(None, feeds)
    got = dml_ep.InferenceSession(model.SerializeToString(), arithmetic="onnxruntime").run(None, feeds)
    if not bias:
        for mine, theirs in zip(got, expected):
            np.testing.assert_array_equal(mine, theirs)
        return
    np.testing.assert_array_equal(got[1], feeds["x"] + feeds["skip"])  # output 3 is input + skip, without the bias
    assert not np.allclose(got[0], expected[0], atol=1e-2)  # onnxruntime normalizes input + skip + bias
    real_ep = exact(feeds["x"], feeds["skip"], parameters["gamma"], None, None, parameters["bias"], 1e-6, True)
    np.testing.assert_allclose(got[0], real_ep, rtol=0, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("op", ["SkipLayerNormalization", "SkipSimplifiedLayerNormalization"])
def test_directml_is_the_real_eps_graph_in_exact_math(dtype, op):
    """Each part rounded to the tensors' type: the sum(s), then the normalization of the rounded sum."""
    model, feeds, parameters = skip_model(op, dtype)
    y, total = dml_ep.InferenceSession(model.SerializeToString(), arithmetic="directml").run(None, feeds)
    simplified = op == "SkipSimplifiedLayerNormalization"
    expected_total = (feeds["x"].astype(np.float32) + feeds["skip"]).astype(dtype)
    if not simplified:
        expected_total = (expected_total.astype(np.float32) + parameters["bias"]).astype(dtype)
    np.testing.assert_array_equal(total, expected_total)
    zero = np.zeros_like(feeds["x"])
    beta = None if simplified else parameters["beta"]
    post = parameters["bias"] if simplified else None
    np.testing.assert_array_equal(y, exact(expected_total, zero, parameters["gamma"], beta, None, post, 1e-6, simplified).astype(dtype))


@pytest.mark.host_sensitive
@pytest.mark.parametrize("hidden", [3, 20, 64, 100, 512])
def test_float32_skip_layer_norm_is_bit_exact_with_onnxruntime(hidden):
    """SkipLayerNormalization: the sums, then skip_layer_norm.cc's scalar loop (Welford) at every size, where
    LayerNormalization's kernel vectorizes (mean_variance_normalization.py's docstring)."""
    model, feeds, _ = skip_model("SkipLayerNormalization", np.float32, hidden=hidden, seed=3)
    expected = cpu_session(model, threads=1).run(None, feeds)
    got = dml_ep.InferenceSession(model.SerializeToString(), arithmetic="onnxruntime").run(None, feeds)
    for mine, theirs in zip(got, expected):
        np.testing.assert_array_equal(mine, theirs)


@pytest.mark.host_sensitive
@pytest.mark.parametrize("op", ["SkipLayerNormalization", "SkipSimplifiedLayerNormalization"])
@pytest.mark.parametrize("hidden", [256, 1024])
def test_float16_normalizes_the_float32_sum_as_onnxruntime(op, hidden):
    """float16: the MVN2 normalizes the float32 input + skip (bound beside the ADD's float16 sum), as the CPU
    kernel does: outputs 0 and 3 bit for bit; the "directml" arithmetic normalizes the graph's float16 sum."""
    model, feeds, _ = skip_model(op, np.float16, hidden=hidden, bias=False, seed=hidden)
    expected = cpu_session(model, threads=1).run(None, feeds)
    got = dml_ep.InferenceSession(model.SerializeToString(), arithmetic="onnxruntime").run(None, feeds)
    for mine, theirs in zip(got, expected):
        np.testing.assert_array_equal(mine, theirs)
    rounded = dml_ep.InferenceSession(model.SerializeToString(), arithmetic="directml").run(None, feeds)[0]
    assert (rounded != expected[0]).any()


@pytest.mark.host_sensitive
def test_float16_bias_rounds_the_sum_output_twice():
    """float16 with input 4: output 0 bit for bit; the graph's output 3 rounds input + skip, then + bias (the
    residual the module docstring names), where onnxruntime rounds once."""
    model, feeds, _ = skip_model("SkipLayerNormalization", np.float16, seed=3)
    expected = cpu_session(model, threads=1).run(None, feeds)
    got = dml_ep.InferenceSession(model.SerializeToString(), arithmetic="onnxruntime").run(None, feeds)
    np.testing.assert_array_equal(got[0], expected[0])
    x, skip = (feeds[n].astype(np.float32) for n in ("x", "skip"))
    bias = numpy_helper.to_array(next(i for i in model.graph.initializer if i.name == "bias")).astype(np.float32)
    np.testing.assert_array_equal(got[1], ((x + skip).astype(np.float16).astype(np.float32) + bias).astype(np.float16))
    assert (got[1] != expected[1]).any()


def test_a_used_mean_output_stays_on_the_cpu():
    model, _, _ = skip_model("SkipLayerNormalization", np.float32)
    model.graph.node[0].output[1] = "mean"
    model.graph.output.append(helper.make_tensor_value_info("mean", 1, None))
    [entry] = dml_ep.InferenceSession(model.SerializeToString()).plan.entries
    assert "QuerySkipLayerNormalization" in entry.reason
