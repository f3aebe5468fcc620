"""dml_ep as a drop-in for onnxruntime (issue 9): a script written for onnxruntime runs unchanged
with ``import dml_ep as ort``, and each answer is onnxruntime's own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

import dml_ep

MODELS = Path(__file__).resolve().parents[2] / "models"


def onnxruntime_script(ort, path: str) -> dict:
    """What a user's onnxruntime script does with a session; ``ort`` is onnxruntime or dml_ep."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(path, options, providers=ort.get_available_providers())
    feed_name = session.get_inputs()[0].name
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    meta = session.get_modelmeta()
    ort_values = session.run_with_ort_values(None, {feed_name: ort.OrtValue.ortvalue_from_numpy(x)})
    session.set_providers(["CPUExecutionProvider"])
    on_cpu = session.run(None, {feed_name: x})
    return {
        "inputs": [(i.name, i.type, i.shape) for i in session.get_inputs()],
        "outputs": [(o.name, o.type) for o in session.get_outputs()],
        "meta": (meta.producer_name, meta.graph_name, meta.version, dict(meta.custom_metadata_map)),
        "overridable": [i.name for i in session.get_overridable_initializers()],
        "options": type(session.get_session_options()).__name__,
        "profile": session.end_profiling(),
        "shape": ort_values[0].numpy().shape,
        "cpu": on_cpu[0],
        "providers": session.get_providers(),
        "provider_options": session.get_provider_options(),
    }


@pytest.mark.host_sensitive
def test_an_onnxruntime_script_runs_unchanged():
    path = str(MODELS / "small_cnn.qdq.onnx")
    ours, theirs = onnxruntime_script(dml_ep, path), onnxruntime_script(onnxruntime, path)
    for key in ("inputs", "outputs", "meta", "overridable", "options", "profile", "shape", "providers", "provider_options"):
        assert ours[key] == theirs[key], key
    np.testing.assert_array_equal(ours["cpu"], theirs["cpu"])  # CPU EP alone: onnxruntime's own answer


def relu_model(output_type=True):
    output = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2]) if output_type else helper.make_empty_tensor_value_info("y")
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])], [output])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_feed_errors_are_value_errors_and_list_feeds_convert():
    session = dml_ep.InferenceSession(relu_model())
    with pytest.raises(ValueError, match="missing input 'x'"):
        session.run(None, {})
    assert session.run(None, {"x": [1, -2]})[0].tolist() == [1.0, 0.0]  # ints become the input's float, as in onnxruntime


@pytest.mark.host_sensitive
def test_untyped_graph_output_loads_with_the_inferred_type():
    model = relu_model(output_type=False)
    session = dml_ep.InferenceSession(model)
    reference = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    assert [(o.name, o.type) for o in session.get_outputs()] == [(o.name, o.type) for o in reference.get_outputs()]
    assert session.run(None, {"x": np.array([3, -1], np.float32)})[0].tolist() == [3.0, 0.0]


@pytest.mark.host_sensitive
def test_cpu_provider_alone_runs_everything_on_the_cpu():
    session = dml_ep.InferenceSession(str(MODELS / "mlp.onnx"), providers=["CPUExecutionProvider"])
    assert session.get_providers() == ["CPUExecutionProvider"]
    assert not session.plan.dml_nodes and all("DmlExecutionProvider" in e.reason for e in session.plan.fallback_nodes)
    x = np.linspace(-2, 2, 3 * 64, dtype=np.float32).reshape(3, 64)
    expected = onnxruntime.InferenceSession(str(MODELS / "mlp.onnx"), providers=["CPUExecutionProvider"]).run(None, {"input": x})
    np.testing.assert_array_equal(session.run(None, {"input": x})[0], expected[0])
