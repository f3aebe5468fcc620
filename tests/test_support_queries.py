"""The real DML EP's support queries, replayed: for each, a node it accepts and one it declines, the
outcome read off the C++ query (onnxruntime 1.24, Operators/DmlOperator*.cpp)."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from dml_ep.plan import FallbackNode
from dml_ep.planner import plan_model
from dml_ep.support_queries import NOT_REPLAYED, QUERIES, QueryContext, declined


def context(op, inputs, outputs, types=None, domain="", **attributes):
    node = helper.make_node(op, inputs, outputs, domain=domain, **attributes)
    types = types or ["float" if name else None for name in inputs]
    return QueryContext(node, tuple(types), tuple(None for _ in inputs), tuple("float" for _ in outputs), tuple(None for _ in outputs))


CASES = [  # query, accepted context, declined context, the C++ condition it trips
    ("QueryResize", context("Resize", ["x", "", "s"], ["y"], mode="linear"), context("Resize", ["x", "", "s"], ["y"], mode="cubic"),
     "QueryResize declines mode 'cubic'"),
    ("QueryResize", context("Resize", ["x", "", "s"], ["y"]), context("Resize", ["x", "", "s"], ["y"], exclude_outside=1),
     "QueryResize declines exclude_outside != 0"),
    ("QuerySkipLayerNormalization", context("SkipLayerNormalization", ["x", "s", "g"], ["y", "", "", "sum"]),
     context("SkipLayerNormalization", ["x", "s", "g"], ["y", "", "inv"]), "QuerySkipLayerNormalization declines a used output 2"),
    ("QueryLayerNormalization", context("LayerNormalization", ["x", "g"], ["y"]), context("LayerNormalization", ["x", "g"], ["y", "mean"]),
     "QueryLayerNormalization declines 2 outputs"),  # GetOutputCount() == 1
    ("QueryAttention", context("Attention", ["x", "w", "b", "m"], ["y"]), context("Attention", ["x", "w", "b", "m", "past"], ["y"]),
     "QueryAttention declines a past input"),  # IsInputValid(4)
    ("QueryAttention", context("Attention", ["x", "w", "b"], ["y"]), context("Attention", ["x", "w", "b"], ["y", "present"]),
     "QueryAttention declines a present output"),  # IsOutputValid(1)
    ("QueryQAttention", context("QAttention", ["x", "w", "b", "sx", "sw", "m"], ["y"]),
     context("QAttention", ["x", "w", "b", "sx", "sw", "m"], ["y"], unidirectional=1), "QueryQAttention declines unidirectional=1 with a mask"),
    ("QueryMatMulNBits", context("MatMulNBits", ["a", "b", "s"], ["y"], K=64, N=8, bits=4, block_size=32),
     context("MatMulNBits", ["a", "b", "s"], ["y"], K=48, N=8, bits=4, block_size=32), "QueryMatMulNBits declines K=48"),
    ("QueryMatMulNBits", context("MatMulNBits", ["a", "b", "s"], ["y"], K=64, N=8, bits=8, block_size=32),
     context("MatMulNBits", ["a", "b", "s"], ["y"], K=64, N=8, bits=2, block_size=32), "QueryMatMulNBits declines bits=2"),
    ("QueryMaxPool", context("MaxPool", ["x"], ["y"], kernel_shape=[2, 2]), context("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], storage_order=1),
     "QueryMaxPool declines storage_order != 0"),
    ("QueryBatchNormalization", context("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"]),
     context("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], types=["float16", "float", "float", "float", "float"]),
     "QueryBatchNormalization declines input 1 of type float"),  # tensorDataType differs from the input's
    ("QueryBatchNormalization", context("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], training_mode=0),
     context("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], training_mode=1), "QueryBatchNormalization declines training_mode=1"),
    ("QueryPad", context("Pad", ["x"], ["y"], pads=[0, 1, 0, 1]), context("Pad", ["x"], ["y"], pads=[0, -1, 0, 1]), "QueryPad declines negative pads"),
    ("QuerySlice", context("Slice", ["x", "s", "e", "a", "t"], ["y"]), context("Slice", ["x", "s", "e", "a", "t", "extra"], ["y"]),
     "QuerySlice declines 6 inputs"),  # GetInputCount() <= 5
    ("QueryScatter", context("ScatterND", ["x", "i", "u"], ["y"]), context("ScatterND", ["x", "i", "u"], ["y"], reduction="add"),
     "QueryScatter declines reduction 'add'"),
    ("QueryRecurrentNeuralNetwork", context("LSTM", ["x", "w", "r"], ["y"], hidden_size=4),
     context("LSTM", ["x", "w", "r"], ["y"], hidden_size=4, layout=1), "QueryRecurrentNeuralNetwork declines layout=1"),
    ("QueryQLinearSigmoid", context("QLinearSigmoid", ["x", "sx", "zx", "sy", "zy"], ["y"]),
     context("QLinearSigmoid", ["x", "sx", "zx", "sy"], ["y"]), "QueryQLinearSigmoid declines 4 inputs"),  # GetInputCount() < 5
]


@pytest.mark.parametrize("query, accepted, rejected, reason", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_query_accepts_and_declines_as_its_source_does(query, accepted, rejected, reason):
    assert declined(query, accepted) is None
    assert declined(query, rejected).startswith(reason)


def test_every_query_of_the_kernel_table_is_replayed_or_said_not_to_be():
    from dml_ep.kernel_registry import kernels
    named = {k.query for rows in kernels("1.24").values() for k in rows if k.query}
    assert named == set(QUERIES) | set(NOT_REPLAYED)
    assert all(NOT_REPLAYED.values())


def test_a_matmul_nbits_the_query_declines_runs_on_the_cpu():
    """K=48 with block_size 32: the DML EP takes only whole blocks, so the node runs on the CPU EP."""
    k, n, block = 48, 8, 32
    b = numpy_helper.from_array(np.zeros((n, 2, block // 2), np.uint8), "b")
    scales = numpy_helper.from_array(np.ones((n * 2,), np.float32), "scales")
    node = helper.make_node("MatMulNBits", ["a", "b", "scales"], ["y"], domain="com.microsoft", K=k, N=n, bits=4, block_size=block)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, n])], [b, scales])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    entry, = plan_model(model).entries
    assert isinstance(entry, FallbackNode) and entry.kind == "support-query"
    assert entry.reason == ("com.microsoft::MatMulNBits: QueryMatMulNBits declines K=48, not a multiple of block_size=32; "
                            "on the CPU in the real EP too")
