"""What the real DML EP does with nodes dml_ep does not model: its support queries send some to the
CPU (Resize, SkipLayerNormalization, QAttention), float operators run on DirectML outside dml_ep's
bit-exact scope, and a 3-D QLinearConv is assigned to DirectML and fails there. Each plan row says
which, with the source's rule."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from dml_ep.operators.nodes import FallbackNode
from dml_ep.planning.planner import plan_model

F = TensorProto.FLOAT


def only_entry(node, inputs, outputs, initializers=(), opsets=(("", 19), ("com.microsoft", 1))):
    graph = helper.make_graph([node], "one", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    entry, = plan_model(model).entries
    assert isinstance(entry, FallbackNode)
    return entry.reason


def resize(**attributes):
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], **attributes)
    return only_entry(node, [helper.make_tensor_value_info("x", F, [1, 1, 4, 4])], [helper.make_tensor_value_info("y", F, [1, 1, 8, 8])],
                      [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")])


@pytest.mark.parametrize("attributes, rule", [({"mode": "cubic"}, "QueryResize declines mode 'cubic'"),
                                              ({"mode": "linear", "extrapolation_value": 1.0}, "QueryResize declines extrapolation_value != 0"),
                                              ({"mode": "cubic", "exclude_outside": 1}, "QueryResize declines mode 'cubic'")])
def test_resize_declined_by_its_support_query_runs_on_the_cpu(attributes, rule):
    assert resize(**attributes) == f"ai.onnx::Resize: {rule}; on the CPU in the real EP too"


def test_resize_the_query_accepts_is_a_float_op_on_directml():
    assert resize(mode="linear") == "ai.onnx::Resize: float op on DirectML in the real EP, not modelled by dml_ep"


@pytest.mark.parametrize("outputs, declined", [(["y"], False), (["y", "mean"], True), (["y", "", "inv_std_var"], True)])
def test_skip_layer_normalization_with_its_statistics_used_runs_on_the_cpu(outputs, declined):
    node = helper.make_node("SkipLayerNormalization", ["x", "skip", "gamma"], outputs, domain="com.microsoft")
    info = helper.make_tensor_value_info
    graph = ([info("x", F, [1, 2, 4]), info("skip", F, [1, 2, 4])], [info(name, F, None) for name in outputs if name],
             [numpy_helper.from_array(np.ones(4, np.float32), "gamma")])
    if declined:
        reason = only_entry(node, *graph)
        assert reason.startswith("com.microsoft::SkipLayerNormalization: QuerySkipLayerNormalization declines a used output")
        assert reason.endswith("on the CPU in the real EP too")
    else:  # Y alone: the DML EP's graph, which dml_ep models (tests/operators/graphs/test_skip_layer_normalization.py)
        model = helper.make_model(helper.make_graph([node], "one", *graph),
                                  opset_imports=[helper.make_opsetid("", 19), helper.make_opsetid("com.microsoft", 1)])
        operators = [entry.operator for entry in plan_model(model).entries]
        assert operators == ["DML_OPERATOR_ELEMENT_WISE_ADD1", "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION2"]


@pytest.mark.parametrize("attributes, rule", [({"do_rotary": 1}, "QueryQAttention declines do_rotary=1"),
                                              ({"past_present_share_buffer": 1}, "QueryQAttention declines past_present_share_buffer=1")])
def test_qattention_declined_by_its_support_query_runs_on_the_cpu(attributes, rule):
    node = helper.make_node("QAttention", ["x", "w", "b", "xs", "ws"], ["y"], domain="com.microsoft", num_heads=1, **attributes)
    info = helper.make_tensor_value_info
    reason = only_entry(node, [info("x", TensorProto.UINT8, [1, 2, 4])], [info("y", F, None)],
                        [numpy_helper.from_array(np.ones((4, 12), np.int8), "w"), numpy_helper.from_array(np.zeros(12, np.float32), "b"),
                         numpy_helper.from_array(np.array(0.1, np.float32), "xs"), numpy_helper.from_array(np.array(0.1, np.float32), "ws")])
    assert reason == f"com.microsoft::QAttention: {rule}; on the CPU in the real EP too"


def test_a_float_log_softmax_is_a_float_op_on_directml():
    """LogSoftmax, which the real EP runs on DirectML, is a float op dml_ep does not model (Softmax it now does)."""
    node = helper.make_node("LogSoftmax", ["x"], ["y"])
    info = helper.make_tensor_value_info
    reason = only_entry(node, [info("x", F, [1, 2, 5, 5])], [info("y", F, None)], [])
    assert reason == "ai.onnx::LogSoftmax: float op on DirectML in the real EP, not modelled by dml_ep"


def test_a_3d_qlinear_conv_is_assigned_to_directml_and_fails_there():
    """DmlOperatorQLinearConv.cpp L46-49 checks 3 <= input rank <= 4 with no support query: the
    real EP takes the node and fails creating it."""
    u8 = np.uint8
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"])
    constants = {"xs": np.float32(0.1), "xz": u8(1), "w": np.ones((2, 1, 1, 1, 1), np.int8), "ws": np.float32(0.1), "wz": np.int8(0),
                 "ys": np.float32(0.2), "yz": u8(3)}
    reason = only_entry(node, [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 1, 2, 2, 2])],
                        [helper.make_tensor_value_info("y", TensorProto.UINT8, None)],
                        [numpy_helper.from_array(np.asarray(v), n) for n, v in constants.items()])
    assert reason.endswith("the real EP assigns it to DirectML (no support query declines it) and fails creating the operator")
    assert reason.startswith("3-D convolution is not supported")
