"""A value whose rank onnxruntime's inference does not know is not a scalar: onnxruntime's NodeArg
says [] for both, and planning it as rank 0 failed models onnxruntime runs (an OCR export's
``Reshape(x, Concat(...))`` feeding a matrix multiply)."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import dml_ep
from dml_ep.cli.commands import main
from dml_ep.ort.inference import static_values
from dml_ep.ort.reference import cpu_session


def reshaped_matmul(batch="N"):
    """x (uint8 [batch, 8]) -> Reshape to [x's first dim, -1] -> QLinearMatMul with a constant B. The
    Abs keeps onnxruntime's ReshapeFusion from turning the shape into the constant [0, -1]."""
    constant = numpy_helper.from_array
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["index"], axis=0),
        helper.make_node("Abs", ["index"], ["rows"]),
        helper.make_node("Unsqueeze", ["rows", "axes"], ["rows_1d"]),
        helper.make_node("Concat", ["rows_1d", "minus_one"], ["new_shape"], axis=0),
        helper.make_node("Reshape", ["x", "new_shape"], ["r"]),
        helper.make_node("QLinearMatMul", ["r", "s", "z", "w", "s", "z", "s", "z"], ["y"]),
    ]
    initializers = [constant(np.array(0, np.int64), "zero"), constant(np.array([0], np.int64), "axes"),
                    constant(np.array([-1], np.int64), "minus_one"), constant(np.float32(0.5), "s"), constant(np.uint8(3), "z"),
                    constant(np.arange(32, dtype=np.uint8).reshape(8, 4), "w")]
    graph = helper.make_graph(nodes, "reshaped", [helper.make_tensor_value_info("x", TensorProto.UINT8, [batch, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, None)], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_a_rank_onnxruntime_does_not_know_stays_unknown():
    values = static_values(reshaped_matmul())
    assert values["r"].shape is None  # onnxruntime's NodeArg: []
    assert values["rows"].shape == ()  # a true scalar, as onnx's inference knows it


@pytest.mark.host_sensitive
def test_a_model_fixed_at_a_shape_loads_and_runs_as_onnxruntime_does():
    model = reshaped_matmul(batch=2)
    x = np.arange(16, dtype=np.uint8).reshape(2, 8)
    ours = dml_ep.InferenceSession(model).run(None, {"x": x})[0]
    np.testing.assert_array_equal(ours, cpu_session(model).run(None, {"x": x})[0])


def test_inspect_at_a_shape_leaves_the_unknown_rank_pending(tmp_path, capsys):
    path = tmp_path / "reshaped.onnx"
    path.write_bytes(reshaped_matmul().SerializeToString())
    assert main(["inspect", str(path), "--shape", "x=2,8"]) == 0
    assert "planned only when run" in capsys.readouterr().out
