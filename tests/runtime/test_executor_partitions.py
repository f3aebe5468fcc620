"""CPU fallback partitions: consecutive nodes that always fall back run as one onnxruntime session,
taking channels-last tensors as they lie; a run that keeps every value runs each node alone."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import dml_ep
from dml_ep.operators.nodes import DmlNode, FallbackNode
from dml_ep.ort.reference import cpu_session
from dml_ep.planning.planner import Planner
from dml_ep.planning.steps import fallback_partitions
from dml_ep.runtime.inputs import random_inputs


def const(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def conv(x, name, w_name):
    return helper.make_node("QLinearConv", [x, "s", "z", w_name, "ws", "wz", "s", "z"], [name], pads=[1, 1, 1, 1])


def conv_pool_conv_model():
    """Quantize -> QLinearConv -> [Tile -> Tile -> Tile] -> QLinearConv -> Dequantize (three ops dml_ep
    does not model between DirectML operators, the last with a shape known only when run: its
    repeats are an input)."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
        conv("q", "c1", "w1"),
        helper.make_node("Tile", ["c1", "once"], ["m1"]),
        helper.make_node("Tile", ["m1", "once"], ["t"]),
        helper.make_node("Tile", ["t", "once"], ["m2"]),
        conv("m2", "c2", "w2"),
        helper.make_node("DequantizeLinear", ["c2", "s", "z"], ["y"]),
    ]
    initializers = [const("s", np.float32(0.05)), const("z", np.uint8(10)), const("ws", np.float32(0.01)), const("wz", np.int8(0)), const("once", np.ones(4, np.int64)),
                    const("w1", rng.integers(-60, 60, (4, 4, 3, 3)).astype(np.int8)),
                    const("w2", rng.integers(-60, 60, (4, 4, 3, 3)).astype(np.int8))]
    graph = helper.make_graph(nodes, "partitions", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


@pytest.mark.host_sensitive
@pytest.mark.parametrize("arithmetic", ["onnxruntime", "directml"])
def test_a_partition_runs_as_one_session_and_matches_onnxruntime(arithmetic):
    model = conv_pool_conv_model()
    feeds = {"x": np.random.default_rng(1).uniform(0, 10, (1, 4, 8, 8)).astype(np.float32)}
    session = dml_ep.InferenceSession(model, arithmetic=arithmetic)
    ours = session.run(None, feeds)[0]
    if arithmetic == "onnxruntime":
        np.testing.assert_array_equal(ours, cpu_session(model, "ort-exact").run(None, feeds)[0])
    groups = [key[0] for key in session.executor._fallback_sessions]
    assert (2, 3, 4) in groups  # the three Tiles: one session
    assert [type(e) for e in session.plan.entries] == [DmlNode, DmlNode, FallbackNode, FallbackNode, FallbackNode, DmlNode, DmlNode]
    # the convolution's channels-last output entered the partition as it lies
    (session_of_group, _, _), = [v for k, v in session.executor._fallback_sessions.items() if k[0] == (2, 3, 4)]
    assert [i.name for i in session_of_group.get_inputs()] == ["c1.nhwc"]


def test_keeping_every_value_runs_each_fallback_node_alone():
    model = conv_pool_conv_model()
    feeds = {"x": np.random.default_rng(2).uniform(0, 10, (1, 4, 8, 8)).astype(np.float32)}
    session = dml_ep.InferenceSession(model, arithmetic="onnxruntime")
    whole = session.run(None, feeds)[0]
    values = session.executor.run(feeds, keep_all=True)
    np.testing.assert_array_equal(values["y"], whole)
    assert {"m1", "t", "m2"} <= values.keys()  # every value, from single-node sessions
    assert {key[0] for key in session.executor._fallback_sessions} >= {(2,), (3,), (4,)}


@pytest.mark.host_sensitive
def test_partitions_are_the_runs_in_execution_order():
    rng = np.random.default_rng(3)
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
        helper.make_node("MaxPool", ["q"], ["a"], kernel_shape=[1, 1]),  # two unconnected branches,
        helper.make_node("AveragePool", ["x"], ["b"], kernel_shape=[1, 1]),  # consecutive
        helper.make_node("Softplus", ["b"], ["c"]),
        conv("a", "d", "w"),
        helper.make_node("DequantizeLinear", ["d", "s", "z"], ["e"]),
        helper.make_node("Add", ["e", "c"], ["y"]),
    ]
    initializers = [const("s", np.float32(0.05)), const("z", np.uint8(10)), const("ws", np.float32(0.01)), const("wz", np.int8(0)),
                    const("w", rng.integers(-60, 60, (4, 4, 3, 3)).astype(np.int8))]
    graph = helper.make_graph(nodes, "runs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 5, 5])], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])  # MaxPool-22: on the CPU
    # MaxPool, AveragePool and Softplus run consecutively (two unconnected branches, one session; a
    # standalone Softplus never maps: on DirectML in the real EP, not modelled) after the QuantizeLinear-21 (QUANTIZE);
    # the conv ends the run; the DequantizeLinear-21 after it is DEQUANTIZE (Add maps to DirectML).
    planner = Planner(model)
    groups = {tuple(planner.nodes[i].op_type for i in group) for group in fallback_partitions(planner).values()}
    assert groups == {("AveragePool", "MaxPool", "Softplus")}
    feeds = {"x": rng.uniform(0, 10, (1, 4, 5, 5)).astype(np.float32)}
    ours = dml_ep.InferenceSession(model, arithmetic="onnxruntime").run(None, feeds)[0]
    np.testing.assert_allclose(ours, cpu_session(model, "ort-exact").run(None, feeds)[0], rtol=1e-6)


@pytest.mark.parametrize("name", ["transformer_block", "shufflenet"])
def test_partitions_give_the_numbers_of_nodes_run_one_by_one(built, name):
    """A partition's one onnxruntime session must not let onnxruntime rewrite its nodes into other
    arithmetic (a QDQ group fused into QLinearMul or QGemm rounds otherwise). The QOperator models
    keep partitions (the built QDQ models have none left: their Q/DQ and 8-bit data movement run
    on DirectML)."""
    model = onnx.load(built(name))
    feeds = random_inputs(model, seed=4)
    session = dml_ep.InferenceSession(model, arithmetic="onnxruntime")
    assert any(len(key[0]) > 1 for key in session.executor._fallback_sessions)  # there are partitions
    whole = session.run(None, feeds)
    alone = session.executor.run(feeds, keep_all=True)
    for output, value in zip(session.get_outputs(), whole):
        np.testing.assert_array_equal(value, alone[output.name])


@pytest.mark.host_sensitive
def test_partitions_free_values_in_execution_order():
    """A sentence-encoder export crashed (KeyError) when partitions were connected parts: nodes 0, 2
    and 3 ran whole at node 0, before node 1, and x, read last by index in that partition, was
    freed before node 1 read it. Partitions are whole runs now, and values are freed after the last
    step that reads them in execution order."""
    nodes = [
        helper.make_node("Softplus", ["x"], ["a1"], name="a1"),  # float ops dml_ep does not model
        helper.make_node("Softsign", ["a1"], ["a2"], name="a2"),
        helper.make_node("PRelu", ["a2", "x"], ["a3"], name="a3"),
        helper.make_node("Elu", ["x"], ["b1"], name="b1"),
    ]
    info = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "interleaved", [info("x", TensorProto.FLOAT, [1, 4])],
                              [info("a3", TensorProto.FLOAT, None), info("b1", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    assert sorted(fallback_partitions(Planner(model)).values()) == [(0, 1, 2, 3)]
    feeds = {"x": np.linspace(-2, 2, 4, dtype=np.float32).reshape(1, 4)}
    ours = dml_ep.InferenceSession(model).run(None, feeds)
    theirs = cpu_session(model).run(None, feeds)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a, b)


@pytest.mark.host_sensitive
def test_independent_fallback_nodes_share_a_session_across_directml_nodes():
    """A wide graph's fallback nodes (10,000 outputs, each of its own Relu) made a session each.
    Nodes 0 and 2 now run as one session at node 0's step, before node 1 (DirectML), which reads
    node 0's output and x, whose last reader by index is node 2: x must outlive the partition's
    step, and node 0's output leave it. Node 3 reads node 1's output: a partition of its own."""
    nodes = [
        helper.make_node("Softplus", ["x"], ["n"], name="n"),  # Softplus, PRelu, Softsign: not modelled
        helper.make_node("Add", ["n", "x"], ["a"], name="a"),
        helper.make_node("PRelu", ["n", "x"], ["b"], name="b"),
        helper.make_node("Softsign", ["a"], ["c"], name="c"),
    ]
    info = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "wide", [info("x", TensorProto.FLOAT, ["batch", 4])],  # the run plans: batch is 2
                              [info(name, TensorProto.FLOAT, ["batch", 4]) for name in ("b", "c")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    session = dml_ep.InferenceSession(model)
    assert [type(entry) for entry in session.plan.entries] == [FallbackNode, DmlNode, FallbackNode, FallbackNode]
    assert list(fallback_partitions(session.planner).values()) == [(0, 2)]
    feeds = {"x": np.linspace(-2, 2, 8, dtype=np.float32).reshape(2, 4)}
    theirs = cpu_session(model).run(None, feeds)
    for _ in range(2):  # planned, then replayed
        for ours, expected in zip(session.run(None, feeds), theirs):
            np.testing.assert_array_equal(ours, expected)
    assert [entry.node.name for entry in session.plan.entries] == ["n", "a", "b", "c"]  # in the model's order


@pytest.mark.host_sensitive
def test_a_runs_mac_share_counts_the_nodes_inside_partitions():
    """A float convolution inside a fallback partition (symbolic batch: its shape is known only
    from the run) counted 0 MACs in a run's plan (it was a float MatMul then, and a float Conv,
    which are now modelled: a ConvTranspose with output_shape is not), so `inspect --input`
    reported 99.9 % on DirectML where compare's plan of the same run said 2.2 %."""
    from dml_ep.conformance.compare import compare_model

    nodes = [helper.make_node("Sigmoid", ["x"], ["a"]), helper.make_node("ConvTranspose", ["a", "w"], ["m"], output_shape=[1, 1]),
             helper.make_node("Neg", ["m"], ["n"]), helper.make_node("Add", ["n", "b"], ["y"])]
    info = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "macs", [info("x", TensorProto.FLOAT, ["N", 16, 1, 1])], [info("y", TensorProto.FLOAT, ["N", 16, 1, 1])],
                              [const("w", np.ones((16, 16, 1, 1), np.float32)), const("b", np.ones((16, 1, 1), np.float32))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    feeds = {"x": np.ones((3, 16, 1, 1), np.float32)}
    session = dml_ep.InferenceSession(model)
    session.run(None, feeds)
    summary = session.plan.summary()
    assert summary["fallback"]["macs"] == 3 * 16 * 16  # ConvTranspose: inputs x OC x KH x KW; the Add (48) on DirectML
    assert summary["dml"]["macs"] == 3 * 16
    assert compare_model(model, feeds).plan["dml"]["macs_percent"] == summary["dml"]["macs_percent"]


@pytest.mark.host_sensitive
@pytest.mark.parametrize(("shape", "pooled"), [([1, 16, 64], False), ([1, 128, 384], False), ([1, 512, 384], True), (["N", 16, 64], True)],
                         ids=["small", "encoder-sized", "large", "unknown"])
def test_a_thread_pool_only_for_fallback_nodes_that_may_be_large(shape, pooled):
    """A pool's wake-ups cost small nodes more than they share; a size unknown before the run keeps one.
    A double LayerNormalization: the DML EP's kernel takes float and float16 only, so it falls back."""
    info = helper.make_tensor_value_info
    width = 64 if shape[-1] == 64 else 384
    graph = helper.make_graph([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1)], "norm",
                              [info("x", TensorProto.DOUBLE, shape)], [info("y", TensorProto.DOUBLE, None)],
                              [const("g", np.ones(width)), const("b", np.zeros(width))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    session = dml_ep.InferenceSession(model)
    assert [type(entry) for entry in session.plan.entries] == [FallbackNode]
    feeds = {"x": np.random.default_rng(0).standard_normal([1 if d == "N" else d for d in shape])}
    np.testing.assert_array_equal(session.run(None, feeds)[0], cpu_session(model).run(None, feeds)[0])
    assert session.executor._pooled == pooled
