"""MEAN_VARIANCE_NORMALIZATION2: LayerNormalization 17, onnxruntime's LayerNormalization 1 and
SimplifiedLayerNormalization 1, against onnxruntime's CPU EP and the formula in float64."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper

import dml_ep
from dml_ep.operators import mean_variance_normalization as mvn
from dml_ep.ort.reference import cpu_session
from onnx_builders import Feed, single_node_model

MVN2 = "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION2"


def llm_inputs(dtype, scale_dtype=None, hidden=256, seed=0):
    """An LLM's [1, S, hidden] activations (off-centre, as a residual stream is) and its gamma, beta."""
    rng = np.random.default_rng(seed)
    scale_dtype = scale_dtype or dtype
    x = (rng.standard_normal((1, 7, hidden)) * 3 + 0.5).astype(dtype)
    return x, rng.standard_normal(hidden).astype(scale_dtype), rng.standard_normal(hidden).astype(scale_dtype)


def layer_norm(op, operands, dtype, epsilon, opset=17):
    """One normalization node; onnx's checker knows no SimplifiedLayerNormalization (onnxruntime's own)."""
    if op == "LayerNormalization" and opset >= 17:
        return single_node_model(op, operands, dtype, 3, opset=opset, epsilon=epsilon)
    x, *parameters = operands
    names = ["x"] + [f"p{index}" for index in range(len(parameters))]
    graph = helper.make_graph([helper.make_node(op, names, ["y"], epsilon=epsilon)], op,
                              [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(x.value.dtype), x.value.shape)],
                              [helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), None)],
                              [numpy_helper.from_array(p, name) for p, name in zip(parameters, names[1:])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), {"x": x.value}


def exact(x, scale, bias, epsilon, simplified):
    x = x.astype(np.float64)
    centred = x if simplified else x - x.mean(-1, keepdims=True)
    y = centred / np.sqrt((centred * centred).mean(-1, keepdims=True) + float(np.float32(epsilon))) * scale.astype(np.float64)
    return y if bias is None else y + bias.astype(np.float64)


def ulps(a, b):
    """The float distance of two arrays of one type, in units of its last place (bit patterns)."""
    bits = {2: np.int16, 4: np.int32}[a.itemsize]
    ia, ib = a.view(bits).astype(np.int64), b.view(bits).astype(np.int64)
    flip = 2 ** (8 * a.itemsize - 1)
    ia, ib = np.where(ia < 0, -flip - ia, ia), np.where(ib < 0, -flip - ib, ib)
    return np.abs(ia - ib)


CASES = [("LayerNormalization", 17, False, True), ("LayerNormalization", 17, False, False), ("SimplifiedLayerNormalization", 17, True, False)]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("epsilon", [1e-5, 1e-6])
@pytest.mark.parametrize("op, opset, simplified, with_bias", CASES)
def test_directml_is_the_formula_rounded_once(dtype, epsilon, op, opset, simplified, with_bias):
    x, scale, bias = llm_inputs(dtype)
    model, feeds = layer_norm(op, [Feed(x), scale] + ([bias] if with_bias else []), dtype, epsilon, opset)
    session = dml_ep.InferenceSession(model.SerializeToString(), arithmetic="directml")
    assert [entry.operator for entry in session.plan.entries] == [MVN2]
    expected = exact(x, scale, bias if with_bias else None, epsilon, simplified).astype(dtype)
    np.testing.assert_array_equal(session.run(None, feeds)[0], expected)


def rows(dtype, hidden, seed, count=96):
    """Rows of many scales and offsets (the float32 loop's rounding shows in a few ULP of most rows)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((count, hidden)) * rng.uniform(0.1, 10, (count, 1)) + rng.uniform(-3, 3, (count, 1))
    return x.astype(dtype)[None], rng.standard_normal(hidden).astype(dtype), rng.standard_normal(hidden).astype(dtype)


# Row lengths across onnxruntime 1.32's loops: scalar (Welford; below 8 for a float32 layer norm, below 16 for a
# float16 one and for RMS norm), vector (8 fma lanes), and each tail (under 4 left, 4, 4 and more).
HIDDEN = [3, 7, 8, 13, 15, 16, 20, 67, 100, 103, 768]


@pytest.mark.host_sensitive
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("hidden", HIDDEN)
@pytest.mark.parametrize("op, with_bias", [("LayerNormalization", True), ("LayerNormalization", False), ("SimplifiedLayerNormalization", False)])
def test_onnxruntime_is_bit_exact(dtype, hidden, op, with_bias):
    """onnxruntime 1.32's layer_norm_impl.cc loops (module docstring), bit for bit."""
    x, scale, bias = rows(dtype, hidden, seed=hidden)
    model, feeds = layer_norm(op, [Feed(x), scale] + ([bias] if with_bias else []), dtype, 1e-5)
    expected = cpu_session(model, threads=1).run(None, feeds)[0]
    got = dml_ep.InferenceSession(model.SerializeToString(), arithmetic="onnxruntime").run(None, feeds)[0]
    np.testing.assert_array_equal(got, expected)
    directml = dml_ep.InferenceSession(model.SerializeToString(), arithmetic="directml").run(None, feeds)[0]
    assert np.abs(directml.astype(np.float64) - expected).max() <= (1 / 1024 if dtype == np.float32 else 1 / 512)  # WebNN's envelope


def welford(x, scale, bias, epsilon):
    """layer_norm_impl.cc's scalar loop over float32 rows, by hand: Welford's mean and M2, then
    (x - mean) / root * scale + bias, each op rounded to float32."""
    f = np.float32
    mean, m2 = np.zeros(x.shape[0], f), np.zeros(x.shape[0], f)
    for k in range(x.shape[1]):
        delta = x[:, k] - mean
        mean = mean + delta / f(k + 1)
        m2 = m2 + delta * (x[:, k] - mean)
    root = np.sqrt(m2 / f(x.shape[1]) + f(epsilon), dtype=f)
    return (x - mean[:, None]) / root[:, None] * scale + bias


@pytest.mark.host_sensitive
def test_the_probe_tells_the_hosts_loop():
    """host_vector_loop: False exactly where the host's onnxruntime runs the scalar loop on long rows
    (no AVX2/FMA: QEMU Nehalem), whose output is then Welford's by hand."""
    x, scale, bias = rows(np.float32, 100, seed=5)
    model, feeds = layer_norm("LayerNormalization", [Feed(x), scale, bias], np.float32, 1e-5)
    host = cpu_session(model, threads=1).run(None, feeds)[0][0]
    assert np.array_equal(host, welford(x[0], scale, bias, 1e-5)) == (not mvn.host_vector_loop())


def test_without_the_vector_loop_every_row_takes_the_scalar_loop(monkeypatch):
    x, scale, bias = rows(np.float32, 768, seed=6)
    model, feeds = layer_norm("LayerNormalization", [Feed(x), scale, bias], np.float32, 1e-5)
    monkeypatch.setattr(mvn, "host_vector_loop", lambda: False)
    got = dml_ep.InferenceSession(model.SerializeToString(), arithmetic="onnxruntime").run(None, feeds)[0][0]
    np.testing.assert_array_equal(got, welford(x[0], scale, bias, 1e-5))


def test_a_float16_input_with_float32_scale_runs_in_float32():
    """SimplifiedLayerNormalization with T float16, V float32: the real EP CASTs the input up (exact)
    and writes a float32 output; the CPU EP has no kernel for the pair, so the reference is the formula."""
    x, scale, _ = llm_inputs(np.float16, np.float32)
    model, feeds = layer_norm("SimplifiedLayerNormalization", [Feed(x), scale], np.float32, 1e-6)
    session = dml_ep.InferenceSession(model.SerializeToString(), arithmetic="directml")
    assert [entry.operator for entry in session.plan.entries] == [MVN2]
    np.testing.assert_array_equal(session.run(None, feeds)[0], exact(x, scale, None, 1e-6, True).astype(np.float32))


def test_a_layer_norm_with_mean_output_runs_on_the_cpu():
    x, scale, bias = llm_inputs(np.float32)
    model, _ = layer_norm("LayerNormalization", [Feed(x), scale, bias], np.float32, 1e-5)
    model.graph.node[0].output.append("mean")
    model.graph.output.append(helper.make_tensor_value_info("mean", 1, None))
    [entry] = dml_ep.InferenceSession(model.SerializeToString()).plan.entries
    assert "QueryLayerNormalization" in entry.reason


def test_the_desc_checks_its_axes():
    from dml_ep.core.errors import DescValidationError
    from dml_ep.operators.importing import tensor
    from dml_ep.operators.mean_variance_normalization import DML_MEAN_VARIANCE_NORMALIZATION2_OPERATOR_DESC as Desc
    t = tensor(np.float32, (1, 2, 8, 1))
    with pytest.raises(DescValidationError, match="Axes"):
        Desc(t, None, None, t, AxisCount=2, Axes=(2, 4), UseMean=1, UseVariance=1, Epsilon=1e-5).validate()
    with pytest.raises(DescValidationError, match="FL_6_3|6_3"):
        Desc(t, None, None, t, AxisCount=1, Axes=(2,), UseMean=1, UseVariance=1, Epsilon=1e-5).validate("6_2")
